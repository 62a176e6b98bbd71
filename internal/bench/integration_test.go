package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// testbedDevices resolves CPU and Vulkan0 (llvmpipe) on the testbed's
// llama-server, once no other test on the machine is measuring.
func testbedDevices(t *testing.T) (*testbed.Env, context.Context) {
	t.Helper()
	env := testbed.Require(t, "llama-vulkan")
	if env.LlamaServer == "" || env.Model == "" {
		t.Fatal("testbed env lacks the llama-server binary or the model")
	}
	testbed.Measuring(t)                           // every caller judges measured speeds
	ctx, cancel := context.WithCancel(t.Context()) // no wall-clock limit: the machine may be loaded
	t.Cleanup(cancel)
	return env, ctx
}

// TestAutoPlaceMeasuresAndCaches is the acceptance for --guard-device auto on the
// testbed: a device is chosen from measurements of both, and the second
// call comes from the cache.
func TestAutoPlaceMeasuresAndCaches(t *testing.T) {
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
	// Which device wins is a measurement: llvmpipe is usually far slower
	// than the CPU, but a loaded machine can say otherwise, so the test
	// checks the choice is a measured one and comes back from the cache;
	// the rules are table-tested on fixed numbers (TestPlace...).
	if p.Device == "" || p.Cached || len(p.Candidates) != 2 {
		t.Fatalf("placement %+v, want a fresh choice between two measured candidates", p)
	}
	for _, c := range p.Candidates {
		t.Logf("%s: verdict %.1f ms, tg16 %.0f tok/s, ratio %.2f, %s %s", c.Device, c.VerdictMS, c.TGTokS, c.Ratio, c.Interpretation, c.Error)
		if c.Interpretation == "" {
			t.Errorf("%s: no interpretation of the measured ratio", c.Device)
		}
	}
	p2, err := AutoPlace(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !p2.Cached || p2.Device != p.Device || p2.Key != p.Key {
		t.Errorf("second placement %+v: want the cached choice %s", p2, p.Device)
	}
}

// TestRunQuickTestbed runs a short sentinel benchmark on CPU vs Vulkan0
// with llama-bench for the device speeds.
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
		t.Logf("%s: device (%s) pp512 %.0f tg16 %.0f t/s, served pp512 %.0f tg16 %.0f t/s, verdict %.1f ms, served share %v, recovery %.0f ms (%d lost), %s %s",
			d.Device, d.SpeedSource, d.DeviceSpeed["pp512"].Median, d.DeviceSpeed["tg16"].Median, d.Served["pp512"].Median, d.Served["tg16"].Median,
			d.VerdictMS.Median, d.ServedShare, d.RecoveryMS, d.RecoveryLost, d.Interpretation, d.Error)
		if d.Error != "" {
			t.Errorf("%s: %s", d.Device, d.Error)
		}
		if d.SpeedSource != SourceLlamaBench || d.LlamaBenchError != "" {
			t.Errorf("%s: speeds from %q (%s), want llama-bench", d.Device, d.SpeedSource, d.LlamaBenchError)
		}
		// A device speed the served one contradicts (llama-bench measured
		// while the machine was busy) is left out with a note, not kept.
		leftOut := func(test string) bool {
			for _, n := range d.Implausible {
				if strings.HasPrefix(n, test+":") {
					return true
				}
			}
			return false
		}
		if d.Served["pp512"].Median <= 0 || d.Served["tg16"].Median <= 0 || d.DeviceSpeed["tg16"].Median <= 0 && !leftOut("tg16") || d.VerdictMS.N != 2 {
			t.Errorf("%s: missing measurements", d.Device)
		}
		if !d.RecoveryTested || d.RecoveryLost != 0 {
			t.Errorf("%s: failure path tested %v, %d requests lost (%q)", d.Device, d.RecoveryTested, d.RecoveryLost, d.RecoveryErrors)
		}
		// The two tools' CPU prefill numbers must agree within a factor
		// of ten, which catches unit and parsing errors (a tokens-per-ms
		// slip is a factor of 1000) and not a loaded machine: on two
		// shared cores the served share has been seen at 0.29 and 2.7
		// (a share above 1 contradicts itself and is left out, noted).
		if a, ok := d.ServedShare["pp512"]; d.Device == "CPU" && !leftOut("pp512") && (!ok || a < 0.1 || a > 10) {
			t.Errorf("%s: server/llama-bench pp512 = %.2f", d.Device, a)
		}
		if d.Interpretation == "" {
			t.Errorf("%s: no interpretation of the measured ratio", d.Device)
		}
		t.Logf("%s: %s", d.Device, d.Interpretation)
	}
	if len(rep.Stability) != 1 || rep.Stability[0] != "CPU" {
		t.Errorf("stability %v", rep.Stability)
	}
}

// refLlamaBench runs llama-bench the way a user would to check the bench,
// with the test's own command line (not runLlamaBench's): one thread, the
// device pinned, all layers on it, everything else at llama-bench's
// defaults. It returns the samples (tok/s) of each test.
func refLlamaBench(t *testing.T, ctx context.Context, binary, model string, d devices.Device, reps int, pp, tg string) map[string][]float64 {
	t.Helper()
	args := []string{"-m", model, "-t", "1", "-p", pp, "-n", tg, "-r", strconv.Itoa(reps), "-o", "json"}
	if d.IsCPU() {
		args = append(args, "-dev", "none", "-ngl", "0")
	} else {
		args = append(args, "-dev", d.Name, "-ngl", "99")
	}
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), d.Env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("llama-bench %v: %v", args, err)
	}
	var rows []struct {
		NPrompt   int       `json:"n_prompt"`
		NGen      int       `json:"n_gen"`
		NThreads  int       `json:"n_threads"`
		SamplesTS []float64 `json:"samples_ts"`
	}
	if err := json.Unmarshal(out[bytes.IndexByte(out, '['):], &rows); err != nil {
		t.Fatalf("llama-bench output: %v", err)
	}
	res := map[string][]float64{}
	for _, r := range rows {
		name := fmt.Sprintf("pp%d", r.NPrompt)
		if r.NGen > 0 {
			name = fmt.Sprintf("tg%d", r.NGen)
		}
		res[name] = append(res[name], r.SamplesTS...)
	}
	return res
}

// TestSpeedsMatchLlamaBench runs the bench on the testbed (CPU and
// Vulkan0 on llvmpipe, stories260K, one thread) with llama-bench for the
// device speeds, and the test's own llama-bench after each round, and
// checks that every measurement ran and is positive: the device speeds
// (llama-bench), the served speeds (llama-server's timings), the server's
// per-token overhead, and that the interpretation and recommendation
// follow the bench's own table from its own ratios.
//
// It does not compare two timings: on a shared, loaded machine two speed
// measurements disagree by more than any fixed margin often enough to
// fail a test (Vulkan0 tg16 served at 63-79% of llama-bench in 2 runs of
// 5 on the 2-core testbed). How far the bench's speeds are from
// llama-bench's is what aegis bench sentinel prints and what this test
// logs; it is a measurement, not an assertion.
func TestSpeedsMatchLlamaBench(t *testing.T) {
	env, ctx := testbedDevices(t)
	lb := SiblingTool(env.LlamaServer, "llama-bench")
	if lb == "" {
		t.Fatal("no llama-bench next to llama-server")
	}
	devs, err := ResolveDevices(ctx, env.LlamaServer, []string{"CPU", "Vulkan0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cpu, vk := devs[0], devs[1]
	start := time.Now()

	// measure runs the bench on dev with the test's own llama-bench (-r 1)
	// after each round, and returns the bench's report, its result for
	// dev and the reference samples, round by round.
	measure := func(dev devices.Device, o Options) (*Report, DeviceResult, map[string][]float64) {
		t.Helper()
		pp := "0"
		if len(o.PP) > 0 {
			pp = strconv.Itoa(o.PP[0])
		}
		var tg []string
		for _, n := range o.TG {
			tg = append(tg, strconv.Itoa(n))
		}
		ref := map[string][]float64{}
		o.afterRound = func(device string, _ int) {
			if device != dev.Label() {
				return
			}
			for k, v := range refLlamaBench(t, ctx, lb, env.Model, dev, 1, pp, strings.Join(tg, ",")) {
				ref[k] = append(ref[k], v...)
			}
		}
		o.Binary, o.LlamaBench, o.Model, o.Threads = env.LlamaServer, lb, env.Model, 1
		o.Verdicts, o.Stability, o.NoInterference, o.NoFailurePath = 2, -1, true, true
		t0 := time.Now()
		rep, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: bench and llama-bench in %v, load average %.1f -> %.1f", dev.Label(), time.Since(t0).Round(time.Second), rep.LoadAvg[0], rep.LoadAvg[1])
		for _, d := range rep.Devices {
			if d.Error != "" || d.SpeedSource != SourceLlamaBench {
				t.Fatalf("%s: error %q, speeds from %q (%s)", d.Device, d.Error, d.SpeedSource, d.LlamaBenchError)
			}
			if d.Device == dev.Label() {
				for k, v := range ref {
					t.Logf("%s %s tok/s: llama-bench here %.0f; the bench's llama-bench %.0f; served %.0f",
						d.Device, k, v, d.DeviceSpeed[k].Samples, d.Served[k].Samples)
				}
				return rep, d, ref
			}
		}
		t.Fatalf("no result for %s", dev.Label())
		return nil, DeviceResult{}, nil
	}
	var cur DeviceResult // the device result positive judges
	positive := func(what string, st Stat) {
		t.Helper()
		if st.N == 0 && len(cur.Implausible) > 0 && strings.Contains(what, "device speed") {
			// The bench left the figure out and said why (a busy machine
			// can make llama-bench's run slower than the server's).
			t.Logf("%s left out: %s", what, strings.Join(cur.Implausible, "; "))
			return
		}
		if st.N == 0 || !(st.Median > 0) || !(st.Max > 0) || math.IsInf(st.Max, 0) {
			t.Errorf("%s: %d samples, median %v, fastest %v: want a positive measurement", what, st.N, st.Median, st.Max)
		}
	}
	// ratio logs how the bench's speeds compare with the test's
	// llama-bench: a figure for the reader, not a pass/fail margin.
	ratio := func(what string, got Stat, ref []float64) {
		if len(ref) == 0 {
			t.Errorf("%s: the test's own llama-bench gave no samples", what)
			return
		}
		r := summarize(ref)
		t.Logf("%s / llama-bench here: %.0f%% (fastest rounds), %.0f%% (medians)", what, 100*got.Max/r.Max, 100*got.Median/r.Median)
	}

	_, d, ref := measure(cpu, Options{Devices: []devices.Device{cpu}, PP: []int{512}, TG: []int{16, 64}, Reps: 5})
	cur = d
	for _, k := range []string{"pp512", "tg16", "tg64"} {
		positive("CPU "+k+" device speed", d.DeviceSpeed[k])
		positive("CPU "+k+" served", d.Served[k])
		ratio("CPU "+k+" device speed", d.DeviceSpeed[k], ref[k])
		ratio("CPU "+k+" served", d.Served[k], ref[k])
	}
	for _, k := range []string{"tg16", "tg64"} {
		if o, ok := d.ServerOverheadUS[k]; !ok || math.IsNaN(o) || math.IsInf(o, 0) {
			t.Errorf("CPU %s: no server overhead reported (%v)", k, d.ServerOverheadUS)
		}
	}

	rep, d, ref := measure(vk, Options{Devices: devs, PP: []int{0}, TG: []int{16}, Reps: 5})
	cur = d
	positive("Vulkan0 tg16 device speed", d.DeviceSpeed["tg16"])
	positive("Vulkan0 tg16 served", d.Served["tg16"])
	ratio("Vulkan0 tg16 device speed", d.DeviceSpeed["tg16"], ref["tg16"])
	ratio("Vulkan0 tg16 served", d.Served["tg16"], ref["tg16"])
	// The conclusions follow the table from the bench's own numbers,
	// whatever the machine's load made them.
	if d.Ratio <= 0 || d.Interpretation != Interpret(d.Ratio, d.Unstable) {
		t.Errorf("Vulkan0: ratio %.2f, interpretation %q, want %q", d.Ratio, d.Interpretation, Interpret(d.Ratio, d.Unstable))
	}
	if want, _ := recommend(rep.Devices); rep.Recommendation != want {
		t.Errorf("recommendation %s (%s), want %s from the measured devices", rep.Recommendation, rep.Reason, want)
	}
	t.Logf("done in %v", time.Since(start).Round(time.Second))
}
