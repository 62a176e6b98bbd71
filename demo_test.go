package aegis

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// TestDemoShowsItsResults runs `make demo`'s script on the testbed: its
// output is the results (no package-manager noise: bringing the testbed
// up goes to a log), the JSON repair shows a document with content, the
// server is started with current flags, and no URL of the stopped server
// is offered at the end.
func TestDemoShowsItsResults(t *testing.T) {
	testbed.Require(t, "llama-cpu")
	script, err := os.ReadFile("scripts/demo")
	if err != nil {
		t.Fatal(err)
	}
	// Every testbed start sends both streams to a log.
	for _, l := range strings.Split(string(script), "\n") {
		if strings.Contains(l, "scripts/testbed up") && !regexp.MustCompile(`>\s*"?\$[a-z_]*log"?\s+2>&1`).MatchString(l) {
			t.Errorf("scripts/demo brings the testbed up without sending its output to a log: %s", strings.TrimSpace(l))
		}
	}

	cmd := exec.Command("bash", "scripts/demo")
	cmd.Env = append(os.Environ(), "DEMO_WAIT=")
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("scripts/demo: %v\n%s", err, text)
	}
	t.Logf("demo output:\n%s", text)
	for _, noise := range []string{"Unpacking ", "Setting up ", "Selecting previously", "Processing triggers"} {
		if strings.Contains(text, noise) {
			t.Errorf("package-manager output in the demo's output (%q)", noise)
		}
	}
	if n := strings.Count(text, "\n"); n > 60 {
		t.Errorf("the demo printed %d lines; its results should not be buried", n)
	}
	log, _ := os.ReadFile(".testbed/demo/serve.log")
	if strings.Contains(string(log), "--incidents is now") {
		t.Errorf("the demo passes serve a deprecated flag:\n%s", log)
	}
	// The JSON repair's answer is a document with content.
	i := strings.Index(text, "2. REPAIR")
	j := strings.Index(text, "3. ")
	if i < 0 || j < i {
		t.Fatalf("no JSON repair step in the output")
	}
	step := text[i:j]
	if !regexp.MustCompile(`answer: '\{\s*"name"\s*:\s*"[^"]+"`).MatchString(step) || !strings.Contains(step, "repaired: invalid_json") {
		t.Errorf("the JSON repair step shows no repaired document with content:\n%s", step)
	}
	// The server is stopped when the demo ends: no URL of it is offered.
	if k := strings.Index(text, "Incidents recorded"); k < 0 || strings.Contains(text[k:], "http://") {
		t.Errorf("the demo offers a URL of the server it stopped")
	}
}
