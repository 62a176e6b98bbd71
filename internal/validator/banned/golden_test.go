package banned

import (
	"flag"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

var update = flag.Bool("update", false, "rewrite testdata/findings.golden.json")

// checkGolden compares the findings of every corpus case with
// testdata/findings.golden.json (go test -update rewrites it).
func checkGolden(t *testing.T, got map[string][]validator.Finding) {
	t.Helper()
	validatortest.GoldenJSON(t, "findings.golden.json", got, *update)
}
