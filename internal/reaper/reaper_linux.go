package reaper

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aegis-sentinel/aegis/internal/llamaproc"
)

// lifelineFd is where the reaper finds its end of the lifeline.
const lifelineFd = 3

// Start starts cmd under a reaper: self (the running program, whose main
// calls Main when Child reports true) re-executed with cmd's path and
// arguments. cmd's standard streams, directory and environment go to the
// command through the reaper. It returns once the command has started, or
// with the error starting it gave. grace is how long the reaper waits
// between SIGTERM and SIGKILL when it stops the command's process tree.
// With self empty, cmd is started directly in a process group of its own.
func Start(cmd *exec.Cmd, self string, grace time.Duration) (*Process, error) {
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	if self == "" {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return &Process{cmd: cmd}, nil
	}
	if len(cmd.ExtraFiles) > 0 {
		return nil, errors.New("reaper: a command with extra files cannot be run under the reaper")
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reaper: lifeline: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "reaper lifeline"), os.NewFile(uintptr(fds[1]), "reaper lifeline")
	argv := cmd.Args
	if len(argv) == 0 {
		argv = []string{cmd.Path}
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, envGrace+"=") })
	cmd.Args = append([]string{self, cmd.Path}, argv...)
	cmd.Path = self
	cmd.Env = append(env, envGrace+"="+grace.String())
	cmd.ExtraFiles = []*os.File{theirs}
	// Its own group: a terminal's Ctrl-C reaches the caller, which asks
	// the reaper to stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("reaper: %w", err)
	}
	line, rerr := bufio.NewReader(io.LimitReader(ours, 4096)).ReadString('\n')
	if started, ok := strings.CutPrefix(line, "started "); ok && rerr == nil {
		if _, err := strconv.Atoi(strings.TrimSpace(started)); err == nil {
			return &Process{cmd: cmd, life: ours}, nil
		}
	}
	ours.Close()
	werr := cmd.Wait()
	if msg, ok := strings.CutPrefix(line, "error "); ok {
		return nil, errors.New(strings.TrimSpace(msg))
	}
	return nil, fmt.Errorf("reaper: it exited before starting the command (%v)", werr)
}

// Main is the reaper: args are the command's path and its argv, its
// standard streams are the command's. It returns the exit code to exit
// with: the command's own, or 128 plus the signal that ended it when
// that signal cannot be raised again.
func Main(args []string, stderr io.Writer) int {
	grace, gerr := time.ParseDuration(os.Getenv(envGrace))
	os.Unsetenv(envGrace)
	syscall.CloseOnExec(lifelineFd)
	life := os.NewFile(lifelineFd, "reaper lifeline")
	fail := func(err error) int {
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		if _, werr := fmt.Fprintf(life, "error %s\n", msg); werr != nil {
			fmt.Fprintf(stderr, "aegis: %s\n", msg)
		}
		return 127
	}
	switch {
	case gerr != nil:
		return fail(fmt.Errorf("reaper: grace period: %w", gerr))
	case len(args) < 2:
		return fail(errors.New("reaper: no command to run"))
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("reaper: becoming a child subreaper: %w", err))
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// The command's parent-death signal (it dies should the reaper be
	// killed) fires when the thread that started it exits: this one is
	// kept for the reaper's life.
	runtime.LockOSThread()
	pid, err := syscall.ForkExec(args[0], args[1:], &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return fail(&os.PathError{Op: "fork/exec", Path: args[0], Err: err})
	}
	// The command holds the standard streams now; the reaper's own copies
	// would keep the caller from seeing the command close them.
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		_ = unix.Dup3(int(null.Fd()), 0, 0)
		_ = unix.Dup3(int(null.Fd()), 1, 0)
		null.Close()
	}
	t := &tree{server: pid, exited: make(chan struct{}), done: make(chan struct{})}
	go t.reap()
	parentGone := make(chan struct{})
	if _, err := fmt.Fprintf(life, "started %d\n", pid); err != nil {
		close(parentGone) // the caller is gone already
	} else {
		go func() {
			_, _ = io.Copy(io.Discard, life)
			close(parentGone)
		}()
	}
	select {
	case <-stop:
	case <-parentGone:
	case <-t.exited:
	}
	llamaproc.Stop(t, grace)
	return t.exitCode()
}

// tree is the reaper's descendants as llamaproc.Stop sees them: signals
// go to the command's process group and to every descendant, Done closes
// when none is left.
type tree struct {
	server  int
	status  syscall.WaitStatus // the command's, once exited is closed
	exited  chan struct{}
	done    chan struct{}
	killing atomic.Bool
}

func (t *tree) Pid() int              { return t.server }
func (t *tree) Done() <-chan struct{} { return t.done }
func (t *tree) Err() error            { return nil }

func (t *tree) Signal(sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		t.killing.Store(true)
	}
	_ = syscall.Kill(-t.server, sig)
	for _, pid := range descendants(os.Getpid()) {
		_ = syscall.Kill(pid, sig)
	}
	return nil
}

// reap waits for every child, the command and the orphans the reaper
// adopts, until it has none. Once SIGKILL has been sent, every reaped
// child is followed by another SIGKILL to all descendants: a process
// forked just before its parent was killed is adopted then.
func (t *tree) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: no descendant is left
			close(t.done)
			return
		}
		if pid == t.server {
			t.status = ws
			close(t.exited)
		}
		if t.killing.Load() {
			_ = t.Signal(syscall.SIGKILL)
		}
	}
}

// exitCode is the command's exit status as the reaper's own. A command
// killed by a signal that ends a process quietly has the reaper raise it
// on itself.
func (t *tree) exitCode() int {
	select {
	case <-t.exited:
	default:
		return 128 + int(syscall.SIGKILL)
	}
	ws := t.status
	if !ws.Signaled() {
		return ws.ExitStatus()
	}
	sig := ws.Signal()
	switch sig {
	case syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGKILL:
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(time.Second) // the signal ends the process meanwhile
	}
	return 128 + int(sig)
}

// descendants lists the processes below pid, read from /proc.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentOf(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// parentOf reads the parent pid from /proc/pid/stat: the fourth field,
// counted after the command name's closing parenthesis.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}
