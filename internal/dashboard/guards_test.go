package dashboard

import (
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestGuardPanelFollowsSupervisor replays the GuardStatus events the guard
// supervisor publishes for a device with a hot CPU standby (its own state
// with no device while starting, each child's state, and its overall state
// naming the serving device) and the guard calls: the panel shows one row
// per device, no leftover "starting" row of the supervisor, the standby as
// ready (not stuck as the fallback once the preferred device serves), and
// the calls counted on the device that made them.
func TestGuardPanelFollowsSupervisor(t *testing.T) {
	d := New(&events.Bus{}, nil)
	defer d.Close()
	st := func(dev, state string) events.Event {
		return events.Event{Kind: events.GuardStatus, Upstream: "guard", GuardDevice: dev, GuardState: state}
	}
	call := func(dev string) events.Event {
		return events.Event{Kind: events.Verdict, RequestID: "r", GuardDevice: dev, Duration: 40 * time.Millisecond,
			Verdict: &validator.Verdict{Verdict: validator.Pass}}
	}
	steps := []struct {
		name string
		evs  []events.Event
		want map[string]string // device -> state shown ("fallback" when it serves as the fallback)
	}{
		{"supervisor starting", []events.Event{st("", "starting")}, map[string]string{"guard": "starting"}},
		{"standby up first: it serves as the fallback", []events.Event{st("CPU", "ready"), st("CPU", "fallback"), call("CPU")},
			map[string]string{"CPU": "ready fallback"}},
		{"preferred up: it serves, the standby waits", []events.Event{st("Vulkan0", "ready"), st("Vulkan0", "ready"), call("Vulkan0"), call("Vulkan0")},
			map[string]string{"Vulkan0": "ready", "CPU": "ready"}},
		{"preferred crashes: the standby serves", []events.Event{st("Vulkan0", "restarting"), st("CPU", "fallback"), call("CPU")},
			map[string]string{"Vulkan0": "restarting", "CPU": "ready fallback"}},
		{"preferred back", []events.Event{st("Vulkan0", "ready"), st("Vulkan0", "ready")},
			map[string]string{"Vulkan0": "ready", "CPU": "ready"}},
	}
	for _, s := range steps {
		for _, e := range s.evs {
			d.Observe(e)
		}
		d.mu.Lock()
		got := map[string]string{}
		for dev, g := range d.guards {
			got[dev] = g.State
			if g.Fallback {
				got[dev] += " fallback"
			}
		}
		calls := map[string]int64{}
		for dev, g := range d.guards {
			calls[dev] = g.Calls
		}
		d.mu.Unlock()
		if len(got) != len(s.want) {
			t.Fatalf("%s: rows %v, want %v", s.name, got, s.want)
		}
		for dev, w := range s.want {
			if got[dev] != w {
				t.Fatalf("%s: rows %v, want %v", s.name, got, s.want)
			}
		}
		if s.name == "preferred back" && (calls["CPU"] != 2 || calls["Vulkan0"] != 2) {
			t.Fatalf("calls %v, want 2 on each device", calls)
		}
	}
}
