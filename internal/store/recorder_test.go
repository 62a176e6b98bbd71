package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

func TestRecorderWritesRetriesAndHalts(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "i.db"), Options{})
	var bus events.Bus
	rec := NewRecorder(s, &bus)
	added := make(chan Incident, 8)
	rec.OnAdd = func(i Incident) { added <- i }

	loop := &validator.Verdict{Verdict: validator.Fail, Risk: validator.RiskMedium, Reason: validator.ReasonRepetitionLoop,
		Action: validator.ActionRetryWithCorrection, Findings: []validator.Finding{{Check: "repetition", Start: 4, End: 12}}}
	leak := &validator.Verdict{Verdict: validator.Fail, Risk: validator.RiskHigh, Reason: validator.ReasonSecretLeak,
		Action: validator.ActionHalt, Findings: []validator.Finding{{Check: "secret", Start: 0, End: 5}}}
	// Published before Run starts: the subscription already exists.
	bus.Publish(events.Event{Kind: events.RequestStarted, RequestID: "a", Route: "/v1/chat/completions", Upstream: "llama", Model: "stories"})
	bus.Publish(events.Event{Kind: events.Verdict, RequestID: "a", Attempt: 1, Verdict: loop})
	bus.Publish(events.Event{Kind: events.Retry, RequestID: "a", Attempt: 1, Verdict: loop, VerdictDelay: time.Millisecond})
	bus.Publish(events.Event{Kind: events.Halt, RequestID: "a", Attempt: 2, Verdict: leak, Text: "sk-12 and more"})
	bus.Publish(events.Event{Kind: events.RequestFinished, RequestID: "a", Outcome: "halted"})
	bus.Publish(events.Event{Kind: events.RequestStarted, RequestID: "b"})
	// The gateway puts the final text and timings on RequestFinished.
	bus.Publish(events.Event{Kind: events.Halt, RequestID: "c", Verdict: leak})
	bus.Publish(events.Event{Kind: events.RequestFinished, RequestID: "c", Outcome: "halted", Text: "sk-99 tail", TTFT: 5 * time.Millisecond})
	// A halt whose finish never comes is written at shutdown.
	bus.Publish(events.Event{Kind: events.Halt, RequestID: "d", Verdict: leak})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- rec.Run(ctx) }()
	// The three incidents whose request ended (or that end nothing) are
	// written as they come; the fourth only at shutdown. No wall-clock
	// limit: go test's -timeout ends a write that never comes.
	for range 3 {
		<-added
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, err := s.List(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("got %d incidents, want 4: %+v", len(got), got)
	}
	if d, c := got[0], got[1]; d.RequestID != "d" || d.HasText || c.RequestID != "c" || c.Text != "sk-99 tail" || c.Timings.TTFT != 5*time.Millisecond {
		t.Errorf("halts completed by RequestFinished / flushed at shutdown: %+v, %+v", c, d)
	}
	halt, retry := got[2], got[3]
	if retry.Kind != KindRetry || retry.Reason != validator.ReasonRepetitionLoop || retry.Upstream != "llama" ||
		retry.Model != "stories" || retry.HasText || retry.Timings.VerdictDelay != time.Millisecond {
		t.Errorf("retry incident = %+v", retry)
	}
	if halt.Kind != KindHalt || halt.Reason != validator.ReasonSecretLeak || halt.Action != validator.ActionHalt ||
		halt.Risk != validator.RiskHigh || !halt.HasText || halt.Text != "sk-12 and more" || halt.Findings[0].End != 5 {
		t.Errorf("halt incident = %+v", halt)
	}
}
