package banned

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

var update = flag.Bool("update", false, "rewrite testdata/findings.golden.json")

// checkGolden compares the findings of every corpus case with
// testdata/findings.golden.json (go test -update rewrites it), so a change
// in offsets or messages is seen in review.
func checkGolden(t *testing.T, got map[string][]validator.Finding) {
	t.Helper()
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	const path = "testdata/findings.golden.json"
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(want, b) {
		t.Errorf("findings differ from %s (go test -update rewrites it after review):\n%s", path, b)
	}
}
