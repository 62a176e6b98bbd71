package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

func TestBenchSentinelUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no model", []string{"bench", "sentinel"}, "--model is required"},
		{"no server on PATH", []string{"bench", "sentinel", "--model", "m.gguf", "--devices", "CPU,Vulkan0"}, "no llama-server on PATH: pass --llama-server PATH"},
		{"bad url", []string{"bench", "sentinel", "--model", "m.gguf", "--url", "CPU:8080"}, "--url wants DEVICE=http"},
		{"bad report", []string{"bench", "sentinel", "--model", "m.gguf", "--llama-server", "x", "--report", "r.pdf"}, "--report must end in .html or .svg"},
		{"bad env", []string{"bench", "sentinel", "--model", "m.gguf", "--llama-server", "x", "--env", "X"}, "--env wants KEY=VALUE"},
		{"bad protocol", []string{"bench", "sentinel", "--model", "m.gguf", "--llama-server", "x", "--protocol", "llamaguard2"}, "unknown guard protocol"},
	}
	t.Setenv("PATH", t.TempDir()) // no llama-server to find
	// The model must exist for the checks after it to be reached.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.gguf"), []byte("GGUF"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := Run(context.Background(), tc.args, &IO{Out: &out, Err: &errb}); code != ExitUsage {
				t.Errorf("exit %d, want %d (%s)", code, ExitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.want)
			}
		})
	}
}

// TestBenchSentinelAutoTestbed runs `aegis bench sentinel --auto` on the
// testbed: the short cached placement picks the CPU over llvmpipe.
func TestBenchSentinelAutoTestbed(t *testing.T) {
	env := testbed.Require(t, "llama-vulkan")
	testbed.Measuring(t) // its verdict depends on measured speed
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"bench", "sentinel", "--auto", "--json", "--model", env.Model,
		"--devices", "CPU,Vulkan0", "--llama-server", env.LlamaServer, "--threads", "1"}, &IO{Out: &out, Err: &errb})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var p struct {
		Device     string `json:"device"`
		Candidates []struct {
			Device         string `json:"device"`
			Interpretation string `json:"interpretation"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Device != "CPU" || len(p.Candidates) != 2 {
		t.Fatalf("placement %+v", p)
	}
	cache, _ := os.ReadFile(filepath.Join(os.Getenv("XDG_CACHE_HOME"), "aegis", "placement.json"))
	if !bytes.Contains(cache, []byte(`"device": "CPU"`)) {
		t.Errorf("placement not cached: %s", cache)
	}
}
