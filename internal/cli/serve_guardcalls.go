package cli

import (
	"context"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// embeddedDevice is the device label of the embedded classifier's calls
// (it runs in-process, on the CPU).
const embeddedDevice = "embedded"

// countedInput wraps the input screen so that every call is published as
// a guard call (events.Verdict with GuardDevice): aegis_guard_calls_total
// and aegis_guard_call_duration_seconds, the dashboard's guard panel and
// the request log count it.
func countedInput(bus *events.Bus, check func(context.Context, *validator.Request) *validator.Verdict) func(context.Context, *validator.Request) *validator.Verdict {
	if check == nil || bus == nil {
		return check
	}
	return func(ctx context.Context, req *validator.Request) *validator.Verdict {
		t0 := time.Now()
		v := check(ctx, req)
		e := events.Event{Kind: events.Verdict, GuardDevice: embeddedDevice, Duration: time.Since(t0)}
		if v != nil {
			vv := *v
			e.Verdict = &vv
		} else {
			e.Verdict = &validator.Verdict{Verdict: validator.Pass, Risk: validator.RiskLow, Action: validator.ActionRelease}
		}
		bus.Publish(e)
		return v
	}
}
