package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// testbedDevices resolves CPU and Vulkan0 (llvmpipe) on the testbed's
// llama-server.
func testbedDevices(t *testing.T) (*testbed.Env, context.Context) {
	t.Helper()
	env := testbed.Require(t, "llama-vulkan")
	if env.LlamaServer == "" || env.Model == "" {
		t.Fatal("testbed env lacks the llama-server binary or the model")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return env, ctx
}

// TestAutoPlacePicksCPU is the acceptance for --guard-device auto on the
// testbed: llvmpipe is slower than the CPU, so the CPU is chosen, and the
// second call comes from the cache.
func TestAutoPlacePicksCPU(t *testing.T) {
	env, ctx := testbedDevices(t)
	devs, err := ResolveDevices(ctx, env.LlamaServer, []string{"CPU", "Vulkan0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 || devs[1].Name != "Vulkan0" || len(devs[1].Env) == 0 {
		t.Fatalf("resolved %+v: want Vulkan0 with GGML_VK_VISIBLE_DEVICES", devs)
	}
	cache := filepath.Join(t.TempDir(), "placement.json")
	o := AutoOptions{Binary: env.LlamaServer, Model: env.Model, Devices: devs, CacheFile: cache, Threads: 1}
	p, err := AutoPlace(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if p.Device != "CPU" || p.Cached {
		t.Fatalf("placement %+v, want a fresh CPU choice", p)
	}
	for _, c := range p.Candidates {
		t.Logf("%s: verdict %.1f ms, tg16 %.0f tok/s, ratio %.2f, %s %s", c.Device, c.VerdictMS, c.TGTokS, c.Ratio, c.Interpretation, c.Error)
		if c.Device == "Vulkan0" && c.Interpretation != VerdictSlower {
			t.Errorf("Vulkan0 interpreted as %q, want %q", c.Interpretation, VerdictSlower)
		}
	}
	p2, err := AutoPlace(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !p2.Cached || p2.Device != "CPU" || p2.Key != p.Key {
		t.Errorf("second placement %+v: want the cached CPU choice", p2)
	}
}

// TestRunQuickTestbed runs a short sentinel benchmark on CPU vs Vulkan0
// with the llama-bench cross-check.
func TestRunQuickTestbed(t *testing.T) {
	env, ctx := testbedDevices(t)
	devs, err := ResolveDevices(ctx, env.LlamaServer, []string{"CPU", "Vulkan0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, Options{
		Binary: env.LlamaServer, LlamaBench: SiblingTool(env.LlamaServer, "llama-bench"), Model: env.Model,
		Devices: devs, PP: []int{512}, TG: []int{16}, Reps: 2, Verdicts: 2, Stability: 1, Threads: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recommendation != "CPU" {
		t.Errorf("recommendation %s (%s), want CPU", rep.Recommendation, rep.Reason)
	}
	for _, d := range rep.Devices {
		t.Logf("%s: pp512 %.0f tg16 %.0f t/s, verdict %.1f ms, agreement %v, recovery %.0f ms (%d lost), %s %s",
			d.Device, d.Speed["pp512"].Median, d.Speed["tg16"].Median, d.VerdictMS.Median, d.Agreement, d.RecoveryMS, d.RecoveryLost, d.Interpretation, d.Error)
		if d.Error != "" {
			t.Errorf("%s: %s", d.Device, d.Error)
		}
		if d.Speed["pp512"].Median <= 0 || d.Speed["tg16"].Median <= 0 || d.VerdictMS.N != 2 {
			t.Errorf("%s: missing measurements", d.Device)
		}
		if !d.RecoveryTested || d.RecoveryLost != 0 {
			t.Errorf("%s: failure path tested %v, %d requests lost", d.Device, d.RecoveryTested, d.RecoveryLost)
		}
		// The shared test machine is noisy (llvmpipe most of all); the
		// 20% comparison is the bench command's job. Here: the two tools'
		// CPU prefill numbers must be the same order of magnitude, which
		// catches unit and parsing errors.
		if a, ok := d.Agreement["pp512"]; d.Device == "CPU" && (!ok || a < 0.33 || a > 3) {
			t.Errorf("%s: server/llama-bench pp512 = %.2f", d.Device, a)
		}
		if d.Device == "Vulkan0" && d.Interpretation != VerdictSlower {
			t.Errorf("Vulkan0: %q, want %q", d.Interpretation, VerdictSlower)
		}
	}
	if len(rep.Stability) != 1 || rep.Stability[0] != "CPU" {
		t.Errorf("stability %v", rep.Stability)
	}
}
