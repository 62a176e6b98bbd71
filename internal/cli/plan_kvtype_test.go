package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/gguf/synth"
)

// TestPlanKVTypeRefusedCommandRuns: for a model whose head dimension (8)
// is not a multiple of the quantized KV cache's 32-element block,
// llama-server refuses -ctk q8_0. The plan must say so and print a
// command llama-server accepts (an f16 cache, sized as f16), never the
// refused flags.
func TestPlanKVTypeRefusedCommandRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	m := synth.Model{Arch: "llama", Name: "tiny", FileType: 1, Layers: 5, Embd: 64, Heads: 8, HeadsKV: 4, FF: 172,
		Vocab: 512, Ctx: 512, WeightType: synth.F32, OutputType: synth.F32}
	if _, err := m.Write(path); err != nil {
		t.Fatal(err)
	}
	plan := func(kv string) (rep struct {
		KVType      string                                `json:"kv_type"`
		KVPerToken  float64                               `json:"kv_bytes_per_token"`
		CommandLine string                                `json:"command_line"`
		Recs        []struct{ ID, Severity, Text string } `json:"recommendations"`
	}) {
		out, errOut, code := runCLI(t, "plan", path, "--kv-type", kv, "--device", "CPU:8GiB", "--json")
		if code != 0 {
			t.Fatalf("--kv-type %s: exit %d: %s", kv, code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("bad JSON: %v\n%s", err, out)
		}
		return rep
	}
	f16 := plan("f16")
	for _, kv := range []string{"q8_0", "q4_0"} {
		rep := plan(kv)
		if strings.Contains(rep.CommandLine, "-ctk "+kv) || strings.Contains(rep.CommandLine, "-ctv "+kv) {
			t.Errorf("--kv-type %s: the command keeps the refused cache type: %s", kv, rep.CommandLine)
		}
		if rep.KVType != "f16" || rep.KVPerToken != f16.KVPerToken {
			t.Errorf("--kv-type %s: planned with kv_type %s, %.0f B/token; want f16, %.0f B/token", kv, rep.KVType, rep.KVPerToken, f16.KVPerToken)
		}
		found := false
		for _, r := range rep.Recs {
			if r.ID == "kv-type-head-dim" {
				found = true
				if r.Severity == "error" || !strings.Contains(r.Text, kv) || !strings.Contains(r.Text, "f16") {
					t.Errorf("--kv-type %s: advice %s %q: want a warning naming %s and the f16 the command uses", kv, r.Severity, r.Text, kv)
				}
			}
			if r.ID == "flash-attn-for-quantized-kv" {
				t.Errorf("--kv-type %s: flash attention advised for a cache the command does not quantize", kv)
			}
		}
		if !found {
			t.Errorf("--kv-type %s: no kv-type-head-dim advice: %+v", kv, rep.Recs)
		}
	}
}
