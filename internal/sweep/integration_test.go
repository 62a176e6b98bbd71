package sweep

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// llamaBench finds the testbed's llama-bench: AEGIS_TESTBED_LLAMA_BENCH, or
// the llama-bench beside the testbed's llama-server.
func llamaBench(t *testing.T, env *testbed.Env) string {
	t.Helper()
	if p := os.Getenv("AEGIS_TESTBED_LLAMA_BENCH"); p != "" {
		return p
	}
	p := filepath.Join(filepath.Dir(env.LlamaServer), "llama-bench")
	if _, err := os.Stat(p); err != nil {
		if testbed.Mandatory() {
			t.Fatalf("llama-bench not found beside %s", env.LlamaServer)
		}
		t.Skipf("llama-bench not found beside %s", env.LlamaServer)
	}
	return p
}

// TestSweepTestbed runs the acceptance sweep with short runs: the CPU,
// Vulkan0 (llvmpipe) and a layer split between them (the last 2 of
// stories260K's 5 layers on Vulkan0), each through llama-bench and
// llama-server. The split must show as a slowdown against the CPU, and its
// load log must hold buffers on both devices.
func TestSweepTestbed(t *testing.T) {
	env := testbed.Require(t, "llama-cpu", "llama-vulkan")
	testbed.Measuring(t) // its verdict depends on measured speed
	bench := llamaBench(t, env)
	sets := []string{
		"cpu: -dev none -t 1",
		"vulkan0: GGML_VK_VISIBLE_DEVICES=0 -dev Vulkan0 -ngl 99 -t 1",
		"split: GGML_VK_VISIBLE_DEVICES=0 -dev Vulkan0 -ngl 2 -t 1",
	}
	cfg := Config{Model: env.Model, Bench: &Engine{Path: bench}, Server: &Engine{Path: env.LlamaServer},
		BenchOptions:  BenchOptions{Reps: 1, Prompt: 32, Gen: 8},
		ServerOptions: ServerOptions{Prompt: "Once upon a time", LoadTimeout: time.Minute}}
	for _, s := range sets {
		set, err := ParseSet(s)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Sets = append(cfg.Sets, set)
	}
	// An independent draft model (its own KV cache) on Vulkan0, server only:
	// the one thing the seeds say may live on the iGPU.
	cfg.Sets = append(cfg.Sets, Set{Name: "draft-on-vulkan0", Env: []string{"GGML_VK_VISIBLE_DEVICES=0"}, SkipBench: true,
		Flags: []string{"-dev", "none", "-t", "1", "-md", env.Model, "-devd", "Vulkan0", "-ngld", "99"}})
	ctx, cancel := context.WithCancel(t.Context()) // no wall-clock limit: the machine may be loaded
	defer cancel()
	rs, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var tbl bytes.Buffer
	_ = WriteTable(&tbl, rs)
	t.Logf("\n%s", tbl.String())
	for _, r := range rs {
		if r.Err != "" {
			t.Fatalf("set %s: %s", r.Set.Name, r.Err)
		}
		if r.PP <= 0 || r.TG <= 0 || r.TTFTSource != TTFTServer || r.TTFT <= 0 || r.MemorySource != MemoryServerLog || r.MemoryBytes == 0 {
			t.Errorf("set %s incomplete: %+v", r.Set.Name, r)
		}
	}
	cpu, split := rs[0], rs[2]
	// Whether the split is slower is a measurement, not a pass/fail
	// margin: on a busy machine the CPU set's own run can be the slow one.
	t.Logf("layer split tg %.1f t/s (x%.2f of the CPU's %.1f)", split.TG, split.TGRatio, cpu.TG)
	var onCPU, onVulkan bool
	for buf := range split.Server.Load.Model {
		onCPU = onCPU || strings.HasPrefix(buf, "CPU")
		onVulkan = onVulkan || strings.HasPrefix(buf, "Vulkan0")
	}
	if !onCPU || !onVulkan {
		t.Errorf("split's model buffers %v are not on both CPU and Vulkan0", split.Server.Load.Model)
	}
	if _, ok := cpu.Server.Load.Model["Vulkan0"]; ok {
		t.Errorf("cpu set put weights on Vulkan0: %v", cpu.Server.Load.Model)
	}
	draft := rs[3]
	if draft.SpeedSource != SpeedServer || draft.Server.Load.KV["Vulkan0"] == 0 || draft.Server.Load.KV["CPU"] == 0 {
		t.Errorf("draft set: speeds from %q, KV buffers %v (want the target's on CPU and the draft's own on Vulkan0)",
			draft.SpeedSource, draft.Server.Load.KV)
	}
}
