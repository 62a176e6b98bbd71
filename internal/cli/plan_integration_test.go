package cli

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/sweep"
	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// TestPlanMemoryMatchesLlamaServer loads each shared model in the real
// llama-server (CPU, same ctx/parallel/KV type) and compares the model and
// KV buffers it reports with aegis plan's weights_bytes and kv_bytes: they
// must agree within 10%.
func TestPlanMemoryMatchesLlamaServer(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	dir := testbed.Shared(t, "models")
	cases := []struct {
		model         string
		ctx, parallel int
	}{
		{"stories260K.gguf", 2048, 1},
		{"stories260K.gguf", 2048, 2},
		{"llama-2-tiny-random.gguf", 4096, 2},
		{"llama-2-tiny-random.gguf", 1024, 1},
	}
	for _, c := range cases {
		t.Run(c.model+"/ctx"+strconv.Itoa(c.ctx)+"x"+strconv.Itoa(c.parallel), func(t *testing.T) {
			path := filepath.Join(dir, c.model)
			out, errOut, code := runCLI(t, "plan", path, "--json", "--ctx", strconv.Itoa(c.ctx),
				"--parallel", strconv.Itoa(c.parallel), "--device", "CPU:16GiB")
			if code != 0 {
				t.Fatalf("plan: exit %d: %s", code, errOut)
			}
			var rep struct {
				WeightsBytes uint64 `json:"weights_bytes"`
				KVBytes      uint64 `json:"kv_bytes"`
				ComputeBytes uint64 `json:"compute_bytes"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			set := sweep.Set{Name: "plan-check", Flags: []string{"-dev", "none", "-t", "1",
				"-c", strconv.Itoa(c.ctx * c.parallel), "-np", strconv.Itoa(c.parallel), "-ctk", "f16", "-ctv", "f16"}}
			ctx, cancel := context.WithCancel(t.Context()) // no wall-clock limit: the machine may be loaded
			defer cancel()
			res, err := sweep.RunServer(ctx, sweep.Engine{Path: env.LlamaServer}, path, set, sweep.ServerOptions{Prompt: "Once upon a time"})
			if err != nil {
				t.Fatal(err)
			}
			within(t, "weights", rep.WeightsBytes, res.Load.ModelBytes)
			within(t, "KV cache", rep.KVBytes, res.Load.KVBytes)
			t.Logf("plan weights %d KV %d compute~%d | llama-server model %d KV %d compute %d",
				rep.WeightsBytes, rep.KVBytes, rep.ComputeBytes, res.Load.ModelBytes, res.Load.KVBytes, res.Load.ComputeBytes)
		})
	}
}

// TestPlanQuantKVRefusal checks the kv-type-head-dim rule against the real
// server: plan says a q8_0 cache will be refused for stories260K (head dim
// 8), llama-server indeed fails to load it, and the command plan prints
// instead loads.
func TestPlanQuantKVRefusal(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	path := filepath.Join(testbed.Shared(t, "models"), "stories260K.gguf")
	out, _, code := runCLI(t, "plan", path, "--json", "--kv-type", "q8_0")
	if code != 0 {
		t.Fatalf("plan exit %d", code)
	}
	var rep struct {
		Recommendations []struct{ ID, Severity string } `json:"recommendations"`
		CommandLine     string                          `json:"command_line"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rep.Recommendations {
		found = found || (r.ID == "kv-type-head-dim" && r.Severity == "warning")
	}
	if !found {
		t.Fatalf("plan did not flag the q8_0 KV cache: %s", out)
	}
	set := sweep.Set{Name: "q8", Flags: []string{"-dev", "none", "-t", "1", "-c", "2048", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := sweep.RunServer(ctx, sweep.Engine{Path: env.LlamaServer}, path, set, sweep.ServerOptions{Prompt: "Once"})
	if err == nil {
		t.Fatal("llama-server loaded a q8_0 KV cache the plan said it would refuse")
	}
	if !strings.Contains(err.Error(), "exited while loading") || !strings.Contains(err.Error(), "does not divide") {
		t.Fatalf("llama-server failed for another reason: %v", err)
	}
	// The printed command is one llama-server runs.
	args := strings.Fields(rep.CommandLine)
	if len(args) < 3 || args[1] != "-m" || args[2] != path {
		t.Fatalf("unexpected command line %q", rep.CommandLine)
	}
	printed := sweep.Set{Name: "printed", Flags: append(args[3:], "-t", "1")}
	if _, err := sweep.RunServer(ctx, sweep.Engine{Path: env.LlamaServer}, path, printed, sweep.ServerOptions{Prompt: "Once"}); err != nil {
		t.Fatalf("llama-server refused the printed command %q: %v", rep.CommandLine, err)
	}
}

func within(t *testing.T, what string, plan, server uint64) {
	t.Helper()
	if server == 0 {
		t.Fatalf("%s: llama-server reported nothing", what)
	}
	dev := math.Abs(float64(plan)-float64(server)) / float64(server)
	if dev > 0.10 {
		t.Errorf("%s: plan %d vs llama-server %d bytes (%.1f%% apart, max 10%%)", what, plan, server, 100*dev)
	} else {
		t.Logf("%s: plan %d vs llama-server %d bytes (%.2f%% apart)", what, plan, server, 100*dev)
	}
}

// TestPlanDiscoversDevices runs plan without --device on the testbed: the
// devices package finds the CPU and, through llama-server --list-devices,
// Vulkan0, which is llvmpipe (a software rasterizer) and must not receive
// the model.
func TestPlanDiscoversDevices(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	path := filepath.Join(testbed.Shared(t, "models"), "stories260K.gguf")
	out, errOut, code := runCLI(t, "plan", path, "--json", "--llama-server", env.LlamaServer, "--env", "GGML_VK_VISIBLE_DEVICES=0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Devices     []struct{ Name, Kind string } `json:"devices"`
		DeviceNotes []string                      `json:"device_notes"`
		Strategy    string                        `json:"strategy"`
		CommandLine string                        `json:"command_line"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Devices) == 0 || rep.Devices[0].Name != "CPU" {
		t.Fatalf("devices %+v", rep.Devices)
	}
	for _, d := range rep.Devices {
		if d.Name == "Vulkan0" {
			t.Errorf("llvmpipe offered as a placement device: %+v", rep.Devices)
		}
	}
	if !strings.Contains(strings.Join(rep.DeviceNotes, "\n"), "Vulkan0") {
		t.Errorf("notes do not say Vulkan0 was left out: %v", rep.DeviceNotes)
	}
	if rep.Strategy != "cpu-only" || !strings.Contains(rep.CommandLine, "-dev none") {
		t.Errorf("strategy %s, command %s", rep.Strategy, rep.CommandLine)
	}
}
