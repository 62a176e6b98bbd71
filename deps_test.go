package aegis

import (
	"os/exec"
	"strings"
	"testing"
)

// purePackages decide from their arguments alone: no network, no
// processes. They are the parts that are table-tested and fuzzed without
// a server, and must stay so.
var purePackages = []string{"chunkscan", "openai", "pipeline", "policy", "sse", "validator"}

// TestPurePackagesImportNoNetOrExec fails when a pure package comes to
// depend, directly or through another package, on net/http or os/exec.
func TestPurePackagesImportNoNetOrExec(t *testing.T) {
	for _, p := range purePackages {
		out, err := exec.Command("go", "list", "-deps", "./internal/"+p).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", p, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "net/http" || dep == "os/exec" {
				t.Errorf("internal/%s depends on %s (go list -deps ./internal/%s | grep -n %s)", p, dep, p, dep)
			}
		}
	}
}
