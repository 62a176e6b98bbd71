package bench

import (
	"fmt"
	"sort"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

// Figures a run can produce that cannot be true. They come from a tool
// that measured something else than it meant to (a cold llama-bench
// repetition, a main-model baseline taken while the machine was busy, a
// standby that never answered): the report leaves them out and says why
// (DeviceResult.Implausible), never prints them as results.
const (
	// maxServedShare: llama-server cannot generate faster than the
	// device decodes bare; above this the pair of figures contradicts
	// itself. The margin is the two tools' noise on a busy machine, where
	// one run of either can come out a third slower than the other; the
	// figures this catches are off by tens or thousands of times.
	maxServedShare = 1.5
	// maxMainShare: the main model cannot run faster because the guard
	// is busy on the same machine.
	maxMainShare = 1.05
	// minFallbackGap: a fallback (next verdict after the kill) this close
	// to the restart (the device serving again) was answered by the
	// restarted device: the standby was never seen.
	minFallbackGap = 0.9
	// minStabilityStarts: one start shows no stability.
	minStabilityStarts = 2
)

// flagImpossible removes the figures that cannot be true from rep and
// notes each one on its device.
func (rep *Report) flagImpossible() {
	for i := range rep.Devices {
		d := &rep.Devices[i]
		tests := make([]string, 0, len(d.ServedShare))
		for k := range d.ServedShare {
			tests = append(tests, k)
		}
		sort.Strings(tests)
		for _, k := range tests {
			if share := d.ServedShare[k]; share > maxServedShare {
				d.note("%s: llama-server served %.0f t/s where llama-bench measured the device at %.0f t/s, "+
					"%.0fx faster than the device decodes: one of the two runs measured something else; the device "+
					"speed, served/device and overhead for %s are left out", k, d.Served[k].Median, d.DeviceSpeed[k].Median, share, k)
				delete(d.ServedShare, k)
				delete(d.ServerOverheadUS, k)
				delete(d.ServerOverheadNoiseUS, k)
				delete(d.DeviceSpeed, k)
			}
		}
		for _, k := range sortedKeysF(d.ServerOverheadUS) {
			if v := d.ServerOverheadUS[k]; v < 0 {
				// Within the noise (the share passed): not resolved.
				d.note("%s: the server overhead per token is below llama-bench's own spread (%+.0f µs): left out", k, v)
				delete(d.ServerOverheadUS, k)
				delete(d.ServerOverheadNoiseUS, k)
			}
		}
		if d.Power.Source == powerNvidiaSMI && devices.Backend(d.Backend) != devices.BackendCUDA {
			d.note("power: %.0f W came from nvidia-smi, a GPU's board power, not this %s guard's; power and tok/J "+
				"are left out", d.Power.Watts, d.Device)
			d.Power = Power{Source: powerNone}
			d.TokPerJoule, d.WhPer1kTok = 0, 0
		}
		if d.MainShare > maxMainShare {
			d.note("main share: the main model measured faster with the guard busy (%.0f t/s) than alone (%.0f t/s), "+
				"which cannot be: one of the runs measured under other load; left out", d.MainTokS, rep.MainAloneTokS)
			d.MainShare, d.MainTokS = 0, 0
		}
		if d.RecoveryTested && d.RestartMS > 0 && d.RecoveryMS >= minFallbackGap*d.RestartMS {
			d.note("fallback %.0f ms vs restart %.0f ms: the next verdict came from the restarted device, "+
				"the hot standby never answered; the fallback time is left out", d.RecoveryMS, d.RestartMS)
			d.RecoveryMS = 0
		}
	}
	if len(rep.Stability) > 0 && len(rep.Stability) < minStabilityStarts {
		rep.Stable = false
	}
}

func (d *DeviceResult) note(format string, args ...any) {
	d.Implausible = append(d.Implausible, fmt.Sprintf(format, args...))
}

func sortedKeysF(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
