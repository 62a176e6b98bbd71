//go:build linux

package reaper

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// envParent makes the test binary a parent that starts a command under
// the reaper, prints its pid line, and waits to be killed.
const envParent = "AEGIS_REAPER_TEST_PARENT"

// TestMain runs the test binary as the reaper when Start re-executes it,
// and as a parent for TestParentKilled; otherwise it runs the tests.
func TestMain(m *testing.M) {
	if Child() {
		os.Exit(Main(os.Args[1:], os.Stderr))
	}
	if os.Getenv(envParent) != "" {
		os.Unsetenv(envParent)
		cmd := exec.Command(os.Args[1], os.Args[2:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		p, err := Start(cmd, os.Args[0], 200*time.Millisecond)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(exitCode(p.Wait()))
	}
	goleak.VerifyTestMain(m)
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// treeScript is a server that ignores the end of its input and SIGTERM,
// with a grandchild in its process group (as npx → sh → node) and one
// that left for a session of its own and whose parent exited (adopted by
// the reaper). It prints the three pids as a JSON array.
const treeScript = `trap '' TERM
sh -c 'exec sleep 600' </dev/null >/dev/null &
g=$!
e=$(setsid sh -c 'sleep 600 </dev/null >/dev/null 2>&1 & echo $!')
echo "[$$,$g,$e]"
exec sleep 600 >/dev/null`

// pidfds opens a pidfd for each pid on the first line of r.
func pidfds(t *testing.T, r io.Reader) []int {
	t.Helper()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("no pid line: %v", err)
	}
	var pids []int
	if err := json.Unmarshal([]byte(line), &pids); err != nil || len(pids) != 3 {
		t.Fatalf("pid line %q: %v", line, err)
	}
	var fds []int
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			if errors.Is(err, unix.ESRCH) {
				continue // already gone: nothing left behind
			}
			t.Fatalf("pidfd_open %d: %v", pid, err)
		}
		t.Cleanup(func() {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) // only when the test failed
			unix.Close(fd)
		})
		fds = append(fds, fd)
	}
	return fds
}

// waitExited waits, on the pidfds' readiness, for every process to exit;
// the deadline only bounds a failure.
func waitExited(t *testing.T, fds []int, deadline time.Duration) {
	t.Helper()
	end := time.Now().Add(deadline)
	left := append([]int(nil), fds...)
	for len(left) > 0 {
		ms := int(time.Until(end) / time.Millisecond)
		if ms <= 0 {
			t.Fatalf("%d of %d processes still running after %s", len(left), len(fds), deadline)
		}
		pfd := make([]unix.PollFd, len(left))
		for i, fd := range left {
			pfd[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		}
		if _, err := unix.Poll(pfd, ms); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
		var still []int
		for i, p := range pfd {
			if p.Revents == 0 {
				still = append(still, left[i])
			}
		}
		left = still
	}
}

// TestParentKilled: the parent is killed with SIGKILL; the reaper stops
// the command, its grandchild and the adopted orphan, all of which ignore
// SIGTERM (so SIGKILL after the grace period ends them).
func TestParentKilled(t *testing.T) {
	parent := exec.Command(os.Args[0], "sh", "-c", treeScript)
	parent.Env = append(os.Environ(), envParent+"=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	parent.Stderr = os.Stderr
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	fds := pidfds(t, out)
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	waitExited(t, fds, time.Minute)
}

// TestStopTheTree: SIGTERM to the reaper (what aegis sends on its own
// shutdown) stops the whole tree and the reaper exits.
func TestStopTheTree(t *testing.T) {
	cmd := exec.Command("sh", "-c", treeScript)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(cmd, os.Args[0], 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Reaped() {
		t.Fatal("not under a reaper")
	}
	fds := pidfds(t, out)
	if err := p.Signal(unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = p.Wait()
	waitExited(t, fds, time.Minute)
	if err == nil {
		t.Error("the reaper exited 0; want the server's death by signal")
	}
}

// TestExitStatusAndLeftovers: the command's exit status is the reaper's,
// and a child the command left running is stopped when it exits.
func TestExitStatusAndLeftovers(t *testing.T) {
	cmd := exec.Command("sh", "-c", `sleep 600 </dev/null >/dev/null & echo "[$$,$!,$!]"; exit 3`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(cmd, os.Args[0], 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	fds := pidfds(t, out)
	if code := exitCode(p.Wait()); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	waitExited(t, fds, time.Minute)
}

// TestStartErrors: a command that cannot be executed is Start's error,
// as it would be without the reaper.
func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "server")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, path, want string }{
		{"missing", filepath.Join(dir, "missing"), "no such file"},
		{"not executable", notExec, "permission denied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Start(exec.Command(c.path), os.Args[0], time.Second)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
				t.Errorf("err = %v, want %q naming %s", err, c.want, c.path)
			}
		})
	}
}
