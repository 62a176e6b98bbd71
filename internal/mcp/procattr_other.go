//go:build !linux

package mcp

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in a process group of its own; there is no
// parent-death signal outside Linux.
func setProcAttr(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

func startLocked(cmd *exec.Cmd) error { return cmd.Start() }
