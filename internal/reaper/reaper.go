// Package reaper runs a child process so that neither it nor anything it
// starts outlives the process that started it, even one killed with
// SIGKILL. On Linux the calling program re-executes itself in a child
// mode (Child and Main) that becomes a child subreaper, starts the
// command in a process group of its own, and, when its parent dies, when
// it is sent SIGTERM, SIGINT or SIGHUP, or when the command exits,
// stops the command's group and every other descendant (SIGTERM, a
// grace period, SIGKILL, as llamaproc stops its servers).
//
// The parent's death is seen as the end of a socket only the parent
// holds, not by a parent-death signal: that signal fires when the thread
// that started the child exits, and a Go program does not choose which
// of its threads starts a process.
//
// Outside Linux, Start starts the command directly in a process group of
// its own, with no reaper.
package reaper

import (
	"os"
	"os/exec"
	"syscall"
)

// envGrace is set, in the reaper's environment only, to its grace period;
// its presence is what makes a process the reaper.
const envGrace = "AEGIS_REAPER_GRACE"

// Child reports whether this process was started by Start to be the
// reaper; its main function must then call Main before anything else.
func Child() bool { return os.Getenv(envGrace) != "" }

// Process is a command started by Start.
type Process struct {
	cmd  *exec.Cmd
	life *os.File // the parent's end of the lifeline (nil: no reaper)
}

// Pid is the process id of the reaper (or of the command when there is
// no reaper); its process group holds it alone.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Reaped reports whether a reaper stands between the caller and the
// command: signals to Pid are then requests to the reaper (SIGTERM: stop
// the command and its descendants within the grace period; SIGKILL:
// end the reaper, whose command is then killed).
func (p *Process) Reaped() bool { return p.life != nil }

// Signal sends sig to the process group of Pid.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Wait waits for the reaper (or the command) to exit and releases what
// Start held. A reaper exits with its command's status once the
// command's descendants are gone too.
func (p *Process) Wait() error {
	err := p.cmd.Wait()
	if p.life != nil {
		p.life.Close()
	}
	return err
}
