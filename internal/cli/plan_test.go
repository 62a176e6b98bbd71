package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/gguf/synth"
)

// Device sets of the acceptance: the seeds' boxes and a CPU-only one.
var (
	box5090 = []string{"--device", "CUDA0:32GiB:dgpu", "--device", "Vulkan1:16GiB:igpu", "--device", "CPU:64GiB:cpu"} // RTX 5090 + UHD 770
	box3090 = []string{"--device", "CUDA0:24GiB:dgpu", "--device", "Vulkan1:8GiB:igpu", "--device", "CPU:64GiB:cpu"}  // RTX 3090 + Radeon 780M
	boxCPU  = []string{"--device", "CPU:64GiB:cpu"}
)

type planCase struct {
	name    string
	model   string // synthetic model file name in the temp dir
	devices []string
	extra   []string
	// The advice the seeds' findings imply.
	strategy string
	wantIDs  []string // recommendation ids that must be present
	notIDs   []string // and absent
	wantCmd  string   // substring of the command line
}

var planCases = []planCase{
	{"70b-5090-uhd770", "llama70b.gguf", box5090, []string{"--ctx", "8192"}, "spill-layers-to-cpu",
		[]string{"spill-layers-to-cpu", "no-spill-to-igpu", "no-overlap-expected", "no-row-split-across-vendors", "draft-model-on-igpu", "measure"},
		[]string{"devd-inert-embedded-mtp", "whole-model"}, "-dev CUDA0 -ngl "},
	{"70b-3090-780m", "llama70b.gguf", box3090, []string{"--ctx", "8192"}, "spill-layers-to-cpu",
		[]string{"spill-layers-to-cpu", "no-spill-to-igpu", "no-row-split-across-vendors"}, nil, "-dev CUDA0 -ngl "},
	{"70b-cpu-only", "llama70b.gguf", boxCPU, []string{"--ctx", "8192"}, "cpu-only",
		[]string{"cpu-only"}, []string{"no-spill-to-igpu", "no-row-split-across-vendors", "draft-model-on-igpu"}, "-dev none"},
	{"70b-cpu-32g-no-fit", "llama70b.gguf", []string{"--device", "CPU:32GiB"}, nil, "does-not-fit",
		[]string{"does-not-fit"}, nil, ""},
	{"qwen3moe-3090-fits", "qwen3moe.gguf", box3090, nil, "whole",
		[]string{"whole-model", "no-row-split-across-vendors", "draft-model-on-igpu"}, []string{"spill-experts-to-cpu"}, "-dev CUDA0 -ngl 49"},
	{"mixtral-3090-experts-to-cpu", "mixtral.gguf", box3090, nil, "spill-experts-to-cpu",
		[]string{"spill-experts-to-cpu", "no-spill-to-igpu"}, []string{"spill-layers-to-cpu"}, "--n-cpu-moe "},
	{"mixtral-5090-q8-kv", "mixtral.gguf", box5090, []string{"--kv-type", "q8_0", "--ctx", "32768", "--parallel", "2"}, "whole",
		[]string{"whole-model", "flash-attn-for-quantized-kv"}, nil, "-ctk q8_0 -ctv q8_0 -fa on"},
	{"glm-mtp-embedded-5090", "glm4moe-mtp.gguf", box5090, nil, "spill-experts-to-cpu",
		[]string{"devd-inert-embedded-mtp", "spill-experts-to-cpu"}, []string{"mtp-head-same-backend"}, "--n-cpu-moe "},
	{"8b-separate-mtp-3090", filepath.Join("pair", "model.gguf"), box3090, []string{"--guard", "qwen2-1.5b"}, "whole",
		[]string{"mtp-head-same-backend", "draft-model-on-igpu", "guard-fits"}, []string{"devd-inert-embedded-mtp"}, "-dev CUDA0 -ngl 33"},
	{"qwen3moe-5090-guard-gguf", "qwen3moe.gguf", box5090, []string{"--guard", "$MODELS/guard-1b.gguf", "--guard-ctx", "8192"}, "whole",
		[]string{"whole-model", "guard-fits"}, []string{"guard-does-not-fit"}, "-dev CUDA0 -ngl 49"},
	{"8b-guard-phi3-cpu-8g", filepath.Join("pair", "model.gguf"), []string{"--device", "CPU:8GiB"}, []string{"--guard", "phi-3-mini"}, "cpu-only",
		[]string{"cpu-only", "guard-does-not-fit"}, nil, "-dev none"},
}

// writeSynthetic writes the synthetic models once per test run.
func writeSynthetic(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pair"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]synth.Model{
		"llama70b.gguf":                         synth.Llama70B(),
		"qwen3moe.gguf":                         synth.Qwen3MoE30B(),
		"mixtral.gguf":                          synth.Mixtral8x7B(),
		"glm4moe-mtp.gguf":                      synth.GLM4MoEMTP(),
		filepath.Join("pair", "model.gguf"):     synth.Dense8B(),
		filepath.Join("pair", "mtp-model.gguf"): synth.MTPHead(),
		"guard-1b.gguf": {Arch: "llama", Name: "synthetic-guard-1b", FileType: 15, Layers: 16, Embd: 2048, Heads: 32,
			HeadsKV: 8, FF: 8192, Vocab: 128256, Ctx: 131072, WeightType: synth.Q4_K, OutputType: synth.Q6_K},
	} {
		if _, err := m.Write(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPlanAdviceGolden(t *testing.T) {
	dir := writeSynthetic(t)
	for _, c := range planCases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"plan", filepath.Join(dir, c.model), "--json"}, c.devices...)
			for _, e := range c.extra {
				args = append(args, strings.ReplaceAll(e, "$MODELS", dir))
			}
			out, errOut, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var rep struct {
				Architecture    string  `json:"architecture"`
				Parameters      uint64  `json:"parameters"`
				Layers          uint64  `json:"layers"`
				ContextLength   uint64  `json:"context_length"`
				WeightsBytes    uint64  `json:"weights_bytes"`
				KVBytesPerToken float64 `json:"kv_bytes_per_token"`
				Strategy        string  `json:"strategy"`
				CommandLine     string  `json:"command_line"`
				Recommendations []struct {
					ID, Severity, Text string
					Finding            struct{ ID, Claim, Source string }
				} `json:"recommendations"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("bad JSON: %v\n%s", err, out)
			}
			if rep.Architecture == "" || rep.Parameters == 0 || rep.Layers == 0 || rep.ContextLength == 0 ||
				rep.WeightsBytes == 0 || rep.KVBytesPerToken == 0 {
				t.Errorf("missing required fields: %+v", rep)
			}
			if rep.Strategy != c.strategy {
				t.Errorf("strategy = %s, want %s", rep.Strategy, c.strategy)
			}
			ids := map[string]bool{}
			for _, r := range rep.Recommendations {
				ids[r.ID] = true
				if r.Finding.ID == "" || r.Finding.Source == "" || r.Text == "" {
					t.Errorf("recommendation %s lacks text or finding", r.ID)
				}
			}
			for _, id := range c.wantIDs {
				if !ids[id] {
					t.Errorf("missing recommendation %s", id)
				}
			}
			for _, id := range c.notIDs {
				if ids[id] {
					t.Errorf("unexpected recommendation %s", id)
				}
			}
			if !strings.Contains(rep.CommandLine, c.wantCmd) {
				t.Errorf("command %q lacks %q", rep.CommandLine, c.wantCmd)
			}
			golden(t, filepath.Join("testdata", "plan", c.name+".json"), strings.ReplaceAll(out, dir, "$MODELS"))
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the output (run with -update after checking):\n%s", path, got)
	}
}

func TestPlanUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"no model", []string{"plan"}, ExitUsage},
		{"two models", []string{"plan", "a.gguf", "b.gguf"}, ExitUsage},
		{"bad kv type", []string{"plan", "x.gguf", "--kv-type", "turbo3"}, ExitUsage},
		{"bad device", []string{"plan", "x.gguf", "--device", "CUDA0"}, ExitUsage},
		{"bad budget", []string{"plan", "--guard-budget", "lots"}, ExitUsage},
		{"missing file", []string{"plan", "/nonexistent/x.gguf"}, ExitUsage}, // unusable input, as the README says
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, errOut, code := runCLI(t, c.args...); code != c.code {
				t.Errorf("exit %d, want %d (%s)", code, c.code, errOut)
			}
		})
	}
}

func TestPlanGuardBudget(t *testing.T) {
	out, errOut, code := runCLI(t, "plan", "--guard-budget", "2GiB")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden(t, filepath.Join("testdata", "plan", "guard-budget-2GiB.txt"), out)
	for _, want := range []string{"Qwen2-1.5B-Instruct", "Phi-3-mini-4k-instruct", "classifier"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanText pins the human-readable report for one case.
func TestPlanText(t *testing.T) {
	dir := writeSynthetic(t)
	args := append([]string{"plan", filepath.Join(dir, "mixtral.gguf"), "--guard", "llama-guard-3-1b"}, box3090...)
	out, errOut, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden(t, filepath.Join("testdata", "plan", "mixtral-3090.txt"), strings.ReplaceAll(out, dir, "$MODELS"))
}
