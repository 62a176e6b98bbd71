package mcp

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// orphanServer stands for npx → sh → node with a server that ignores the
// end of its input and SIGTERM: a grandchild in its process group, one
// that left for a session of its own and whose parent exited, and the
// server itself, whose pids it announces in a notification.
const orphanServer = `trap '' TERM
sh -c 'exec sleep 600' </dev/null >/dev/null &
g=$!
e=$(setsid sh -c 'sleep 600 </dev/null >/dev/null 2>&1 & echo $!')
echo "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":[$$,$g,$e]}}"
exec sleep 600 >/dev/null`

// TestKilledAegisLeavesNoServer: aegis mcp stdio is killed with SIGKILL;
// the server, its grandchild and the orphan it left all end (the reaper
// sends SIGTERM, then SIGKILL after the grace period). Their exits are
// awaited on pidfds.
func TestKilledAegisLeavesNoServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds aegis: not in -short")
	}
	bin := aegisBin(t)
	cmd := exec.Command(bin, "mcp", "stdio", "--incidents-db", filepath.Join(t.TempDir(), "i.db"), "--", "sh", "-c", orphanServer)
	stdin, err := cmd.StdinPipe() // held open: aegis is not told to stop
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no notification from the server: %v", err)
	}
	var m struct {
		Params struct {
			Data []int `json:"data"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil || len(m.Params.Data) != 3 {
		t.Fatalf("notification %q: %v", line, err)
	}
	fds := openPidfds(t, m.Params.Data)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if left := waitPidfds(t, fds, 2*time.Minute); len(left) > 0 {
		t.Errorf("processes %v outlived aegis", left)
	}
}

// TestFailedStartThroughTheReaper: with the aegis binary (so the reaper),
// a server that cannot be executed gets initialize a JSON-RPC error.
func TestFailedStartThroughTheReaper(t *testing.T) {
	if testing.Short() {
		t.Skip("builds aegis: not in -short")
	}
	bin := aegisBin(t)
	missing := filepath.Join(t.TempDir(), "no-such-server")
	cmd := exec.Command(bin, "mcp", "stdio", "--incidents-db", filepath.Join(t.TempDir(), "i.db"), "--", missing)
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}` + "\n")
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Errorf("aegis exited with %v, want a failure", err)
	}
	var m map[string]any
	if json.Unmarshal(out, &m) != nil || errCode(m) != CodeServerGone || m["id"] != 0.0 ||
		!strings.Contains(errMessage(m), "did not start") || !strings.Contains(errMessage(m), missing) {
		t.Errorf("initialize answered %s", out)
	}
}

// openPidfds opens a pidfd for each pid; a process left by a failed test
// is killed at cleanup.
func openPidfds(t *testing.T, pids []int) map[int]int {
	t.Helper()
	fds := map[int]int{}
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd_open %d: %v", pid, err)
		}
		t.Cleanup(func() {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			unix.Close(fd)
		})
		fds[pid] = fd
	}
	return fds
}

// waitPidfds waits on the pidfds' readiness for the processes to exit and
// returns the pids still running at the deadline (which only bounds a
// failure).
func waitPidfds(t *testing.T, fds map[int]int, deadline time.Duration) []int {
	t.Helper()
	end := time.Now().Add(deadline)
	for len(fds) > 0 {
		ms := int(time.Until(end) / time.Millisecond)
		if ms <= 0 {
			break
		}
		var pids []int
		var pfd []unix.PollFd
		for pid, fd := range fds {
			pids = append(pids, pid)
			pfd = append(pfd, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
		if _, err := unix.Poll(pfd, ms); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
		for i, p := range pfd {
			if p.Revents != 0 {
				delete(fds, pids[i])
			}
		}
	}
	var left []int
	for pid := range fds {
		left = append(left, pid)
	}
	return left
}
