package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Recorder writes every Retry and Halt event from a bus into a Store as
// an incident, and applies the store's retention limits periodically.
//
// It subscribes when created, so no event published after NewRecorder is
// missed even if Run starts later. Writes happen on Run's goroutine, never
// on the request path; when the recorder falls behind by more than its
// buffer, the bus drops events and counts them (events.Bus.Dropped).
type Recorder struct {
	// Logger receives write errors; nil means slog.Default().
	Logger *slog.Logger
	// PruneEvery is how often retention runs; zero means every minute.
	PruneEvery time.Duration
	// OnAdd, when set, is called after each incident is stored (the
	// dashboard uses it to refresh its list). It must not block.
	OnAdd func(Incident)

	st  Writer
	sub *events.Subscription
	// reqs remembers what RequestStarted said about a request, so an
	// incident has its route, upstream and model even when the Retry or
	// Halt event leaves them out.
	reqs map[string]requestInfo
	// halts waits for the RequestFinished that follows a Halt: the
	// gateway puts the final output (when text logging is allowed) and the
	// request's timings there, and the halt's findings point into it.
	halts map[string]pendingHalt
}

type pendingHalt struct {
	inc  Incident
	seen time.Time
}

// haltWait is how long a halt waits for its RequestFinished before it is
// written without the text and timings.
const haltWait = 5 * time.Second

type requestInfo struct {
	route, upstream, model string
	seen                   time.Time
}

// RecorderBuffer is the number of events a Recorder buffers.
const RecorderBuffer = 4096

// Writer is what a Recorder needs from an incident log.
type Writer interface {
	Add(ctx context.Context, inc *Incident) (int64, error)
	Prune(ctx context.Context) (int64, error)
}

// NewRecorder subscribes to bus and returns a recorder writing into st.
// Call Run to start writing.
func NewRecorder(st Writer, bus *events.Bus) *Recorder {
	return &Recorder{st: st, sub: bus.Subscribe(RecorderBuffer), reqs: map[string]requestInfo{}, halts: map[string]pendingHalt{}}
}

// Run writes incidents until ctx is done, then stops its subscription and
// writes what was already buffered before returning.
func (r *Recorder) Run(ctx context.Context) error {
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	every := r.PruneEvery
	if every <= 0 {
		every = time.Minute
	}
	r.prune(ctx, log)
	tick := time.NewTicker(every)
	defer tick.Stop()
	flush := time.NewTicker(haltWait / 5)
	defer flush.Stop()
	for {
		select {
		case e, ok := <-r.sub.C:
			if !ok {
				return nil
			}
			r.handle(ctx, log, e)
		case <-tick.C:
			r.prune(ctx, log)
			r.forget(time.Now().Add(-10 * time.Minute))
		case now := <-flush.C:
			r.flushHalts(ctx, log, now.Add(-haltWait))
		case <-ctx.Done():
			r.sub.Close()
			drain, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for e := range r.sub.C {
				r.handle(drain, log, e)
			}
			r.flushHalts(drain, log, time.Now().Add(time.Hour))
			return nil
		}
	}
}

func (r *Recorder) prune(ctx context.Context, log *slog.Logger) {
	if n, err := r.st.Prune(ctx); err != nil {
		if ctx.Err() != nil {
			return // shutting down: retention runs at the next start
		}
		log.Error("incident log retention failed", "err", err)
	} else if n > 0 {
		log.Debug("incident log pruned", "removed", n)
	}
}

// forget drops request info older than cut, in case a RequestFinished
// event was lost.
func (r *Recorder) forget(cut time.Time) {
	for id, ri := range r.reqs {
		if ri.seen.Before(cut) {
			delete(r.reqs, id)
		}
	}
}

func (r *Recorder) handle(ctx context.Context, log *slog.Logger, e events.Event) {
	switch e.Kind {
	case events.RequestStarted:
		r.reqs[e.RequestID] = requestInfo{route: e.Route, upstream: e.Upstream, model: e.Model, seen: time.Now()}
		return
	case events.RequestFinished:
		delete(r.reqs, e.RequestID)
		if p, ok := r.halts[e.RequestID]; ok {
			delete(r.halts, e.RequestID)
			if !p.inc.HasText && e.Text != "" {
				p.inc.Text, p.inc.HasText = e.Text, true
			}
			t := &p.inc.Timings
			t.TTFT = cmpOr(t.TTFT, e.TTFT)
			t.Duration = cmpOr(t.Duration, e.Duration)
			t.HeldBytes = cmpOr(t.HeldBytes, e.HeldBytes)
			t.Tokens = cmpOr(t.Tokens, e.Tokens)
			r.add(ctx, log, p.inc)
		}
		return
	case events.Retry, events.Halt, events.Flag, events.Approval:
	default:
		return
	}
	inc := IncidentFromEvent(e)
	if ri, ok := r.reqs[e.RequestID]; ok {
		inc.Route = cmpOr(inc.Route, ri.route)
		inc.Upstream = cmpOr(inc.Upstream, ri.upstream)
		inc.Model = cmpOr(inc.Model, ri.model)
	}
	if e.Kind == events.Halt {
		if old, ok := r.halts[e.RequestID]; ok { // a second halt: keep both
			r.add(ctx, log, old.inc)
		}
		r.halts[e.RequestID] = pendingHalt{inc: inc, seen: time.Now()}
		return
	}
	r.add(ctx, log, inc)
}

// flushHalts writes the halts that waited since before cut for their
// RequestFinished.
func (r *Recorder) flushHalts(ctx context.Context, log *slog.Logger, cut time.Time) {
	for id, p := range r.halts {
		if p.seen.Before(cut) {
			delete(r.halts, id)
			r.add(ctx, log, p.inc)
		}
	}
}

func (r *Recorder) add(ctx context.Context, log *slog.Logger, inc Incident) {
	if _, err := r.st.Add(ctx, &inc); err != nil {
		log.Error("incident not recorded", "request_id", inc.RequestID, "reason", string(inc.Reason), "err", err)
		return
	}
	if r.OnAdd != nil {
		r.OnAdd(inc)
	}
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// IncidentFromEvent turns a Retry, Halt, Flag or Approval event into an incident (ID zero).
// The text is kept only when the event carries it, which the gateway does
// only when the configuration allows logging outputs.
func IncidentFromEvent(e events.Event) Incident {
	inc := Incident{
		Time:      e.Time,
		Kind:      KindRetry,
		RequestID: e.RequestID,
		Route:     e.Route,
		Upstream:  e.Upstream,
		Model:     e.Model,
		Attempt:   e.Attempt,
		Timings: Timings{
			TTFT: e.TTFT, VerdictDelay: e.VerdictDelay, Duration: e.Duration,
			HeldBytes: e.HeldBytes, Tokens: e.Tokens,
		},
		Text:    e.Text,
		HasText: e.Text != "",
	}
	if e.Kind == events.Flag {
		inc.Kind = KindWarn
	}
	if e.Kind == events.Approval && e.Approval != nil {
		return approvalIncident(inc, e.Approval)
	}
	if e.Kind == events.Halt {
		inc.Kind = KindHalt
		switch {
		case e.Verdict != nil && e.Verdict.Action == validator.ActionBlock:
			inc.Kind = KindBlock // the same word as the request's outcome
		case e.Verdict != nil && e.Verdict.Action == validator.ActionRedact:
			inc.Kind = KindRedact
		}
	}
	if v := e.Verdict; v != nil {
		inc.Reason, inc.Action, inc.Risk = v.Reason, v.Action, v.Risk
		inc.Findings = v.Findings
	}
	if inc.Action == "" {
		switch e.Kind {
		case events.Halt:
			inc.Action = validator.ActionHalt
		case events.Flag:
			inc.Action = validator.ActionRelease
		default:
			inc.Action = validator.ActionRetryWithCorrection
		}
	}
	return inc
}

// KindApproval prefixes the kinds of approval incidents:
// approval_proposed, approval_approved, approval_denied, approval_expired,
// approval_cancelled, approval_released (one per stage of a held call).
const KindApproval = "approval_"

// approvalIncident records one stage of a held call: the tools, argument
// paths, rule, argument hash and policy version in one finding, never an
// argument's value.
func approvalIncident(inc Incident, a *events.ApprovalRecord) Incident {
	inc.Kind = Kind(KindApproval + a.Stage)
	inc.Reason = validator.Reason(a.Reason)
	inc.Action = validator.ActionApprove
	inc.Risk = validator.RiskHigh
	var calls []string
	for _, c := range a.Calls {
		calls = append(calls, fmt.Sprintf("%s(%s)", c.Tool, strings.Join(c.Paths, ", ")))
	}
	msg := fmt.Sprintf("approval %s %s: %s; arguments %s, policy %s", a.ID, a.Stage, strings.Join(calls, ", "), a.ArgsHash, a.PolicyVersion)
	if a.By != "" {
		msg += "; by " + a.By
	}
	if a.Rule != "" {
		msg += "; rule: " + a.Rule
	}
	inc.Findings = []validator.Finding{{Check: "approval", Reason: inc.Reason, Path: "tool_calls", Message: msg}}
	return inc
}
