package pipeline

import (
	"os"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/checks"
)

// TestMain registers the built-in checks in validator.Default, which the
// corpus, the real-data tests and the benchmarks resolve policies in.
func TestMain(m *testing.M) {
	checks.RegisterDefault()
	os.Exit(m.Run())
}
