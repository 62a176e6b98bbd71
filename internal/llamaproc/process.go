package llamaproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Spec is what a Starter launches.
type Spec struct {
	Path string
	Args []string
	Env  []string // added to the parent's environment
	// Output receives every line the child writes to stdout or stderr.
	Output func(line string)
}

// Process is a started child. Signal goes to the child's whole process
// group so helpers it spawned stop with it.
type Process interface {
	Pid() int
	// Done is closed when the process has exited and been reaped.
	Done() <-chan struct{}
	// Err is the exit status after Done.
	Err() error
	Signal(sig syscall.Signal) error
}

// Starter launches a child process. The default, ExecStarter, runs a real
// binary in its own process group; tests inject fakes.
type Starter func(ctx context.Context, s Spec) (Process, error)

// ExecStarter starts s as a real process in a new process group
// (Setpgid), feeding its output lines to s.Output.
func ExecStarter(_ context.Context, s Spec) (Process, error) {
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("llamaserver: pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("llamaserver: start %s: %w", s.Path, err)
	}
	pw.Close()
	p := &execProcess{cmd: cmd, done: make(chan struct{})}
	var lines sync.WaitGroup
	lines.Add(1)
	go func() {
		defer lines.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			if s.Output != nil {
				s.Output(sc.Text())
			}
		}
		// Drain anything past an over-long line so the child never blocks.
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = cmd.Wait()
		// Let the reader drain what the child wrote last (an OOM message
		// just before it died); a grandchild holding the pipe open must
		// not keep us waiting, so the read end closes after a second.
		drained := make(chan struct{})
		go func() { lines.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(time.Second):
			pr.Close()
			<-drained
		}
		pr.Close()
		close(p.done)
	}()
	return p, nil
}

type execProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *execProcess) Pid() int              { return p.cmd.Process.Pid }
func (p *execProcess) Done() <-chan struct{} { return p.done }
func (p *execProcess) Err() error            { return p.err }
func (p *execProcess) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Stop stops p's process group: SIGTERM, then SIGKILL after grace. It
// returns when the process has been reaped.
func Stop(p Process, grace time.Duration) {
	select {
	case <-p.Done():
		_ = p.Signal(syscall.SIGKILL) // leftovers of the group, if any
		return
	default:
	}
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.Done():
	case <-t.C:
		_ = p.Signal(syscall.SIGKILL)
		<-p.Done()
	}
	_ = p.Signal(syscall.SIGKILL)
}
