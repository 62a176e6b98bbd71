package bench

import (
	"strings"
	"testing"
)

// TestBenchLeavesOutImpossibleNumbers: the figures a sentinel run once
// printed as results although none can be true (llama-server serving
// tg16 at 3,708 t/s on a device llama-bench measured at 4 t/s; the main
// model 4.07x as fast with the guard busy as alone; a fallback exactly as
// long as the restart, the standby never seen; "stable" from one start)
// are left out of the report and flagged, and the plausible ones stay.
func TestBenchLeavesOutImpossibleNumbers(t *testing.T) {
	rep := &Report{Model: "stories260K.gguf", Reps: 3, MainAloneTokS: 900,
		Stability: []string{"CPU"}, Stable: true,
		Devices: []DeviceResult{{
			Device: "CPU", SpeedSource: SourceLlamaBench,
			DeviceSpeed:           map[string]Stat{"tg16": {Median: 4, Max: 4.1, N: 3}, "tg64": {Median: 3500, Max: 3600, N: 3}},
			Served:                map[string]Stat{"tg16": {Median: 3708, Max: 3750, N: 3}, "tg64": {Median: 3300, Max: 3400, N: 3}},
			ServedShare:           map[string]float64{"tg16": 3750 / 4.1, "tg64": 3400.0 / 3600},
			ServerOverheadUS:      map[string]float64{"tg16": 1e6/3750 - 1e6/4.1, "tg64": 1e6/3400 - 1e6/3600},
			ServerOverheadNoiseUS: map[string]float64{"tg16": 1e6/4 - 1e6/4.1, "tg64": 1e6/3500 - 1e6/3600},
			VerdictMS:             Stat{Median: 30, N: 8}, MainTokS: 3663, MainShare: 4.07,
			RecoveryMS: 1520, RestartMS: 1520, RecoveryTested: true,
			Ratio: 1, Interpretation: VerdictBaseline,
		}},
	}
	rep.flagImpossible()
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, bad := range []string{"91463%", "tg16 -", "4.07", "1520/1520", "stable: true"} {
		if strings.Contains(out, bad) {
			t.Errorf("the report prints an impossible figure (%q):\n%s", bad, out)
		}
	}
	d := rep.Devices[0]
	if _, ok := d.ServedShare["tg64"]; !ok {
		t.Errorf("the plausible tg64 share was dropped too: %+v", d.ServedShare)
	}
	if rep.Stable || d.MainShare != 0 || d.RecoveryMS != 0 {
		t.Errorf("stable %v, main share %v, fallback %v kept", rep.Stable, d.MainShare, d.RecoveryMS)
	}
	if len(d.Implausible) < 3 || !strings.Contains(out, "left out") {
		t.Errorf("the left-out figures are not flagged: %q\n%s", d.Implausible, out)
	}
}
