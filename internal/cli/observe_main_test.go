package cli

import (
	"os"
	"testing"
)

// TestMain keeps the package's tests hermetic: a serve test that names no
// --incidents file writes to a temporary log, not to the user's state dir.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "aegis-cli-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("AEGIS_INCIDENTS", dir+"/incidents.db")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
