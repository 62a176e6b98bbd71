package testbed

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		wantErr bool
		wantCPU string
	}{
		{name: "full", file: "# comment\nAEGIS_TESTBED_LLAMA_CPU_URL=http://127.0.0.1:1\nAEGIS_TESTBED_OLLAMA_URL=http://127.0.0.1:2\n", wantCPU: "http://127.0.0.1:1"},
		{name: "empty file", file: "", wantErr: true},
		{name: "bad line", file: "NOEQUALS\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "env")
			if err := os.WriteFile(p, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv("AEGIS_TESTBED_ENV", p)
			for _, k := range []string{"AEGIS_TESTBED_LLAMA_CPU_URL", "AEGIS_TESTBED_LLAMA_VULKAN_URL", "AEGIS_TESTBED_OLLAMA_URL"} {
				if v, ok := os.LookupEnv(k); ok {
					os.Unsetenv(k)
					t.Cleanup(func() { os.Setenv(k, v) })
				}
			}
			e, err := Load()
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && e.LlamaCPUURL != tt.wantCPU {
				t.Fatalf("cpu url %q, want %q", e.LlamaCPUURL, tt.wantCPU)
			}
		})
	}
}

// TestMeasuringExcludes checks that a second holder waits for the first.
func TestMeasuringExcludes(t *testing.T) {
	// A lock file of this test's own: the machine-wide one is held for
	// minutes at a time by the measuring tests of other packages running
	// at once, which would make this test's wait measure them instead.
	old := measuringLock
	measuringLock = filepath.Join(t.TempDir(), "measuring.lock")
	t.Cleanup(func() { measuringLock = old })
	released := make(chan struct{})
	got := make(chan struct{})
	t.Run("first", func(t *testing.T) {
		Measuring(t)
		go func() {
			// A separate file description contends like another process.
			f, err := os.OpenFile(measuringLock, os.O_RDWR, 0)
			if err != nil {
				t.Error(err)
				close(got)
				return
			}
			defer f.Close()
			syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
			select {
			case <-released:
			default:
				t.Error("second holder got the lock while the first held it")
			}
			syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			close(got)
		}()
		time.Sleep(50 * time.Millisecond)
		close(released) // the cleanup that unlocks runs right after this subtest returns
	})
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("second holder never got the lock")
	}
}
