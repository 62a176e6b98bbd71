package mcp

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in a process group of its own (so a stop
// reaches its children) and has the kernel kill it should Aegis die
// (Pdeathsig). The signal reaches the process Aegis started, not its own
// children: a launcher's child is left to end on its closed input.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// startLocked starts cmd. The parent-death signal fires when the thread
// that started the child exits; the Go runtime ends a thread only when a
// goroutine exits while locked to it, which none here does, so the signal
// comes when the process dies.
func startLocked(cmd *exec.Cmd) error { return cmd.Start() }
