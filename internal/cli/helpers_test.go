package cli

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
)

// update rewrites golden files under testdata/ instead of comparing.
var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// runCLI runs aegis with args and empty stdin, returning what it printed
// and its exit code. Tests that need stdin use runCheckCLI.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, &IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return out.String(), errb.String(), code
}
