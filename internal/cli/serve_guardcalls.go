package cli

import (
	"context"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
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

// publishGuardCalls publishes every guard model call of this process (a
// guard_llm check on a guard server, the supervised --guard-model server,
// guard workers over NATS) on bus as a guard call, like countedInput's:
// labelled by the device or server that answered. It returns the function
// that stops it.
func publishGuardCalls(bus *events.Bus) (stop func()) {
	return llm.ObserveCalls(func(c llm.Call) {
		e := events.Event{Kind: events.Verdict, RequestID: c.RequestID, Attempt: c.Attempt, GuardDevice: c.Device,
			Duration: c.Duration, Verdict: c.Verdict}
		if c.Err != nil {
			e.Error = c.Err.Error()
		}
		bus.Publish(e)
	})
}
