package mcp

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/aegis-sentinel/aegis/internal/checks"
)

// TestMain registers the built-in checks (the policies the judges use
// resolve them) and fails the package's tests when a goroutine outlives
// them.
func TestMain(m *testing.M) {
	checks.RegisterDefault()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if binDir != "" {
			os.RemoveAll(binDir)
		}
	}))
}
