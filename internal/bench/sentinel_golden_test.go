package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSentinelReportRecordedGolden: the recorded H200 machine's
// `bench sentinel` report (guard on the CPU, main model on the GPU
// through Ollama) re-rendered as the bench prints a finished run. That
// run charged nvidia-smi's board power (127 W) to the CPU guard, and its
// fallback was as long as the restart: both are left out, with the
// reason, and the figures that were true stay.
func TestSentinelReportRecordedGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "h200", "sentinel.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("sentinel.json: %v", err)
	}
	if len(rep.Devices) != 1 || rep.Devices[0].Power.Source != powerNvidiaSMI {
		t.Fatalf("the fixture is not the recorded run: %d devices, power %+v", len(rep.Devices), rep.Devices[0].Power)
	}
	rep.flagImpossible()
	d := rep.Devices[0]
	if d.Power.Source != powerNone || d.Power.Watts != 0 || d.TokPerJoule != 0 || d.WhPer1kTok != 0 {
		t.Errorf("the CPU guard keeps the GPU's power: %+v, %.3f tok/J", d.Power, d.TokPerJoule)
	}
	var out strings.Builder
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, bad := range []string{"127.4", "5589/5589"} {
		if strings.Contains(got, bad) {
			t.Errorf("the report prints %q, which the recorded run cannot back:\n%s", bad, got)
		}
	}
	for _, want := range []string{"887.6", "0.93", "n/a/5589 (0 lost)", "main model alone: 345 tok/s",
		"power: 127 W came from nvidia-smi", "recommendation: guard on CPU"} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	golden(t, filepath.Join("testdata", "h200", "sentinel.txt"), got)
}

// TestPowerBelongsToDevice: power is kept where its source measures the
// guard's own device (RAPL for the CPU, nvidia-smi for a CUDA GPU) and
// left out where nvidia-smi's GPU watts were charged to another device.
func TestPowerBelongsToDevice(t *testing.T) {
	cases := []struct {
		name, device, backend, source string
		keep                          bool
	}{
		{"CPU with RAPL", "CPU", "CPU", powerRAPL, true},
		{"CUDA GPU with nvidia-smi", "CUDA0", "CUDA", powerNvidiaSMI, true},
		{"CPU with nvidia-smi", "CPU", "CPU", powerNvidiaSMI, false},
		{"Vulkan with nvidia-smi", "Vulkan0", "Vulkan", powerNvidiaSMI, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := &Report{Devices: []DeviceResult{{Device: c.device, Backend: c.backend,
				Power: Power{Source: c.source, Watts: 100, Joules: 300}, TokPerJoule: 0.5, WhPer1kTok: 0.6}}}
			rep.flagImpossible()
			d := rep.Devices[0]
			kept := d.Power.Watts == 100 && d.TokPerJoule == 0.5 && d.WhPer1kTok == 0.6
			if kept != c.keep {
				t.Errorf("power kept %v, want %v: %+v (notes %q)", kept, c.keep, d.Power, d.Implausible)
			}
			if !c.keep && (len(d.Implausible) != 1 || !strings.Contains(d.Implausible[0], "nvidia-smi")) {
				t.Errorf("the left-out power is not explained: %q", d.Implausible)
			}
		})
	}
}
