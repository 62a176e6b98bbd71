//go:build !linux

package reaper

import (
	"errors"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// Start starts cmd in a process group of its own; there is no reaper
// outside Linux, so self and grace are unused.
func Start(cmd *exec.Cmd, self string, grace time.Duration) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Process{cmd: cmd}, nil
}

// Main reports that there is no reaper outside Linux.
func Main(args []string, stderr io.Writer) int {
	io.WriteString(stderr, "aegis: "+errors.New("the reaper runs on Linux only").Error()+"\n")
	return 127
}
