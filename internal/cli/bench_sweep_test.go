package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

func TestBenchSweepUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"no model", []string{"bench", "sweep", "--set", "cpu: -dev none"}},
		{"no sets", []string{"bench", "sweep", "--model", "m.gguf"}},
		{"bad set", []string{"bench", "sweep", "--model", "m.gguf", "--set", "-dev none"}},
		{"missing sets file", []string{"bench", "sweep", "--model", "m.gguf", "--sets", "/nonexistent.yaml"}},
		{"no engine", []string{"bench", "sweep", "--model", "m.gguf", "--set", "a: x", "--no-bench"}},
		{"stray argument", []string{"bench", "sweep", "extra"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, errOut, code := runCLI(t, c.args...); code != ExitUsage {
				t.Errorf("exit %d, want %d (%s)", code, ExitUsage, errOut)
			}
		})
	}
}

// TestBenchSweepCLI runs the command end to end on the testbed with one
// short CPU set, JSON output and a chart.
func TestBenchSweepCLI(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	testbed.Measuring(t) // its verdict depends on measured speed
	bench := filepath.Join(filepath.Dir(env.LlamaServer), "llama-bench")
	if p := os.Getenv("AEGIS_TESTBED_LLAMA_BENCH"); p != "" {
		bench = p
	}
	chart := filepath.Join(t.TempDir(), "sweep.svg")
	sets := filepath.Join(t.TempDir(), "sets.yaml")
	if err := os.WriteFile(sets, []byte("sets:\n  - name: cpu-t1\n    flags: [-dev, none, -t, '1']\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "bench", "sweep", "--llama-bench", bench, "--model", env.Model,
		"--sets", sets, "--set", "cpu-t2: -dev none -t 2", "-r", "1", "-p", "16", "-n", "4", "--json", "--chart", chart)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rs []struct {
		Set     struct{ Name string } `json:"set"`
		PP, TG  float64
		PPRatio float64 `json:"pp_ratio"`
	}
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rs) != 2 || rs[0].Set.Name != "cpu-t1" || rs[1].Set.Name != "cpu-t2" || rs[0].PPRatio != 1 {
		t.Errorf("results %+v", rs)
	}
	svg, err := os.ReadFile(chart)
	if err != nil || !strings.Contains(string(svg), "<svg") || !strings.Contains(string(svg), "cpu-t2") {
		t.Errorf("chart: %v %.200s", err, svg)
	}
}
