package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/llamaproc"
)

// TestExecStarterLastLinesAndGroupKill runs real shell children: the
// last line before an exit reaches Output (OOM detection depends on it),
// and Signal stops the whole process group, grandchildren included.
func TestExecStarterLastLinesAndGroupKill(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	out := func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }
	p, err := llamaproc.ExecStarter(context.Background(), llamaproc.Spec{Path: "/bin/sh", Args: []string{"-c", "echo loading; echo 'ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000 MiB: cudaMalloc failed: out of memory' >&2; exit 3"}, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	var ee interface{ ExitCode() int }
	if !errors.As(p.Err(), &ee) || ee.ExitCode() != 3 {
		t.Errorf("exit %v", p.Err())
	}
	mu.Lock()
	got := strings.Join(lines, "\n")
	mu.Unlock()
	if !strings.Contains(got, "loading") || !oomLine.MatchString(got) {
		t.Errorf("lines %q", got)
	}

	pidFile := filepath.Join(t.TempDir(), "grandchild")
	p, err = llamaproc.ExecStarter(context.Background(), llamaproc.Spec{Path: "/bin/sh", Args: []string{"-c", "sleep 60 & echo $! > " + pidFile + "; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	// The bounds below only end a wait for a process that never starts or
	// never exits; they are far past what a loaded machine takes.
	var gpid int
	deadline := time.Now().Add(time.Minute)
	for gpid == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile(pidFile)
		if s := strings.TrimSpace(string(b)); s != "" {
			for _, c := range s {
				gpid = gpid*10 + int(c-'0')
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if gpid == 0 {
		t.Fatal("grandchild did not start")
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatal("child did not exit on SIGTERM to its group")
	}
	deadline = time.Now().Add(time.Minute)
	for syscall.Kill(gpid, 0) == nil { // until it is gone and reaped
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d survived the group signal", gpid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
