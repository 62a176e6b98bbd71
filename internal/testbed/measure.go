package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// measuringLock is the lock file Measuring takes. Tests of this package
// point it at a file of their own, so they do not wait for the measuring
// tests of other test binaries that run at the same time.
var measuringLock = filepath.Join(os.TempDir(), "aegis-testbed-measuring.lock")

// Measuring makes the calling test the only measuring test on this
// machine until it ends. go test runs several packages' test binaries at
// once, and on a 2-core machine a llama-bench run in one package starves
// a llama-server that another package is timing (llama.cpp's CPU threads
// spin, so a busy core slows them many times over): a test whose verdict
// depends on measured speed (placement, bench agreement) calls Measuring
// first. The lock is an flock on a file in the system's temporary
// directory, taken blocking and released when the test's cleanup runs.
func Measuring(t testing.TB) {
	t.Helper()
	path := measuringLock
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("testbed: measuring lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("testbed: measuring lock %s: %v", path, fmt.Errorf("flock: %w", err))
	}
	t.Cleanup(func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
