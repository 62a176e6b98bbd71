package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/gguf/synth"
)

// TestPlanH200CPUOnlyServer is the recorded NVIDIA H200 machine (its
// sysfs, nvidia-smi and CPU-only llama-server --list-devices): the plan
// must name the GPU the llama-server cannot see, plan the 3B-shaped F16
// main model on it as CUDA0 and say the command needs a CUDA build.
func TestPlanH200CPUOnlyServer(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "main-3b-f16.gguf")
	m := synth.Model{Arch: "llama", Name: "random-llama-3b-shape", FileType: 1, Layers: 28, Embd: 3072, Heads: 24, HeadsKV: 8,
		FF: 8192, Vocab: 32000, Ctx: 8192, WeightType: synth.F16, OutputType: synth.F16}
	if _, err := m.Write(model); err != nil {
		t.Fatal(err)
	}
	fix := filepath.Join("..", "devices", "testdata")
	smi, err := os.ReadFile(filepath.Join(fix, "nvidia-smi", "h200.csv"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := filepath.Abs(filepath.Join(fix, "listdevices", "none.txt"))
	if err != nil {
		t.Fatal(err)
	}
	server := filepath.Join(dir, "llama-server")
	if err := os.WriteFile(server, []byte("#!/bin/sh\ncat '"+list+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := planFlags{ctx: 4096, parallel: 1, kvType: "f16", server: "llama-server", discoverWith: server,
		discover: func(ctx context.Context, o devices.Options) (*devices.Report, error) {
			o.Root, o.SMIOutput = filepath.Join(fix, "sysfs", "h200"), smi
			return devices.Discover(ctx, o)
		}}
	rep, err := runPlan(context.Background(), []string{model}, f)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Device != "CUDA0" || !strings.Contains(rep.CommandLine, "-dev CUDA0") || !strings.Contains(rep.BuildNeeded, "CUDA") {
		t.Errorf("device %s, command %q, build %q", rep.Device, rep.CommandLine, rep.BuildNeeded)
	}
	var b bytes.Buffer
	writePlan(&b, rep)
	got := strings.ReplaceAll(b.String(), dir, "$DIR")
	if !strings.Contains(got, "no CUDA or Vulkan backend") {
		t.Errorf("plan does not say what the llama-server lacks:\n%s", got)
	}
	golden(t, filepath.Join("testdata", "plan", "h200-cpu-only-server.txt"), got)
}

// TestDevicesH200Text is `aegis devices` on the recorded H200 machine with
// its CPU-only llama-server: the card by name with its memory, driver and
// compute capability, classed as a datacenter GPU, and the missing backend.
func TestDevicesH200Text(t *testing.T) {
	fix := filepath.Join("..", "devices", "testdata")
	smi, err := os.ReadFile(filepath.Join(fix, "nvidia-smi", "h200.csv"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := filepath.Abs(filepath.Join(fix, "listdevices", "none.txt"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	server := filepath.Join(dir, "llama-server")
	if err := os.WriteFile(server, []byte("#!/bin/sh\ncat '"+list+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := devices.Discover(context.Background(), devices.Options{Root: filepath.Join(fix, "sysfs", "h200"), SMIOutput: smi, LlamaServer: server})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printDevices(&IO{Out: &out}, r)
	got := strings.ReplaceAll(out.String(), dir, "$DIR")
	for _, want := range []string{"NVIDIA H200 [10de:2335]", "143771 MiB VRAM", "compute capability 9.0", "class nvidia-datacenter", "no CUDA or Vulkan backend"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	golden(t, filepath.Join("testdata", "devices", "h200.txt"), got)
}
