// Package events carries what happens to each request (started, verdict,
// retry, halt, finished) from the gateway to whoever watches: metrics, the
// live dashboard, the incident log and structured logs. Publishing never
// blocks the request path: a slow subscriber loses events, and the loss is
// counted.
package events

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Kind says what an Event reports.
type Kind int

// The event kinds, in the order they happen to a request.
const (
	RequestStarted  Kind = iota // the gateway accepted a request
	AttemptStarted              // an upstream attempt began (Attempt counts from 1)
	Verdict                     // an attempt ended with a verdict (pass or fail)
	Retry                       // a failed attempt is being retried, hidden from the client
	Halt                        // the request was stopped with an error code
	RequestFinished             // the response to the client is complete
	GuardStatus                 // a guard server or device changed state
	Flag                        // a finding was recorded and what it was about let through (an MCP tool under "warn")
	Approval                    // a held tool call was proposed to a person, decided on, or released (Event.Approval)
)

func (k Kind) String() string {
	switch k {
	case RequestStarted:
		return "request_started"
	case AttemptStarted:
		return "attempt_started"
	case Verdict:
		return "verdict"
	case Retry:
		return "retry"
	case Halt:
		return "halt"
	case RequestFinished:
		return "request_finished"
	case GuardStatus:
		return "guard_status"
	case Flag:
		return "flag"
	case Approval:
		return "approval"
	}
	return "unknown"
}

// MarshalText encodes the kind by name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText decodes a kind name, so events read back from JSON (the
// fleet's event subjects) keep their kind.
func (k *Kind) UnmarshalText(b []byte) error {
	for c := RequestStarted; c <= Approval; c++ {
		if c.String() == string(b) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("unknown event kind %q", b)
}

// Event is one thing that happened to one request. Fields that do not
// apply to a kind are zero.
type Event struct {
	Kind      Kind      `json:"kind"`
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id"`
	Route     string    `json:"route,omitempty"`    // "/v1/chat/completions", "/api/chat", ...
	Upstream  string    `json:"upstream,omitempty"` // the upstream's configured name
	Model     string    `json:"model,omitempty"`
	Stream    bool      `json:"stream,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`

	// Verdict is set on Verdict, Retry and Halt events.
	Verdict *validator.Verdict `json:"verdict,omitempty"`
	// ToolCalls are the calls the attempt made, with what became of each
	// (Verdict events).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Outcome on RequestFinished: one of the Outcome constants.
	Outcome string `json:"outcome,omitempty"`
	// Status is the HTTP status sent to the client (RequestFinished).
	Status int `json:"status,omitempty"`

	// Timings (RequestFinished and Verdict): time to first token the client
	// saw, time from the upstream's last token to the verdict, the latency
	// Aegis added to the first token, and total duration.
	TTFT         time.Duration `json:"ttft_ns,omitempty"`
	VerdictDelay time.Duration `json:"verdict_delay_ns,omitempty"`
	AddedTTFT    time.Duration `json:"added_ttft_ns,omitempty"`
	Duration     time.Duration `json:"duration_ns,omitempty"`
	// HeldBytes is the most text held back behind the release point.
	HeldBytes int `json:"held_bytes,omitempty"`
	// Tokens is the upstream's completion token count when known.
	Tokens int `json:"tokens,omitempty"`

	// Text is the attempt's output, only when the configuration allows
	// logging outputs; empty otherwise.
	Text string `json:"text,omitempty"`

	// Approval is the held call's approval record (Approval events).
	Approval *ApprovalRecord `json:"approval,omitempty"`

	// Guard fields (GuardStatus and guard verdicts): device and state.
	GuardDevice string `json:"guard_device,omitempty"`
	GuardState  string `json:"guard_state,omitempty"`
	Error       string `json:"error,omitempty"`
}

// ToolCall is one tool call an attempt made and what became of it.
type ToolCall struct {
	// Tool is the function's name when the request declared it, else
	// "undeclared" (a model's made-up names must not grow the metrics).
	Tool string `json:"tool"`
	// Outcome is ToolReleased, ToolRefused or ToolDropped.
	Outcome string `json:"outcome"`
}

// The outcomes of a tool call: released to the client, refused by a check
// (a finding at the call), or dropped with an attempt that failed for
// another reason.
const (
	ToolReleased = "released"
	ToolRefused  = "refused"
	ToolDropped  = "dropped"
)

// ApprovalRecord is a tool call held for a person's decision, as the
// approvals API shows it and Approval events carry it: the tools, the
// argument paths and the rule that asked, never an argument's value.
type ApprovalRecord struct {
	ID        string    `json:"id"`
	RequestID string    `json:"request_id"`
	Time      time.Time `json:"time"`
	// Deadline is when the call is denied unless someone decides.
	Deadline time.Time `json:"deadline"`
	// Stage is where the approval is: proposed, approved, denied,
	// expired, cancelled (the client left) or released.
	Stage string         `json:"stage"`
	Calls []ApprovalCall `json:"calls"`
	// Reason is the reason code of the verdict that asked.
	Reason string `json:"reason"`
	// Rule is what the rule that asked said: the findings' messages,
	// which name paths, byte counts and sources, never values.
	Rule string `json:"rule"`
	// ArgsHash is the SHA-256 of the held calls' names and canonical
	// arguments; PolicyVersion the version of the policy that asked. A
	// decision must name both.
	ArgsHash      string `json:"args_hash"`
	PolicyVersion string `json:"policy_version"`
	// By says who decided (approved and denied stages).
	By string `json:"by,omitempty"`
	// Gateway names the gateway that holds the call, when the record
	// came from a fleet's shared store.
	Gateway string `json:"gateway,omitempty"`
}

// ApprovalCall is one held tool call: its name and the paths of its
// arguments.
type ApprovalCall struct {
	Index int      `json:"index"`
	Tool  string   `json:"tool"`
	Paths []string `json:"paths"`
}

// Bus fans events out to subscribers. The zero value is ready to use. A
// nil *Bus discards everything, so callers need no nil checks.
type Bus struct {
	// Clock stamps events published without a Time; nil means the wall
	// clock. Set it before the first Publish.
	Clock clock.Clock

	mu      sync.RWMutex
	subs    map[*Subscription]struct{}
	dropped atomic.Uint64
}

// Subscription receives events on C until Close.
type Subscription struct {
	C   <-chan Event
	c   chan Event
	bus *Bus
}

// Subscribe returns a subscription with a buffer of n events. Events that
// do not fit are dropped for this subscriber only.
func (b *Bus) Subscribe(n int) *Subscription {
	if n < 1 {
		n = 1
	}
	c := make(chan Event, n)
	s := &Subscription{C: c, c: c, bus: b}
	b.mu.Lock()
	if b.subs == nil {
		b.subs = make(map[*Subscription]struct{})
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Close stops delivery and closes C. It is safe to call twice.
func (s *Subscription) Close() {
	b := s.bus
	b.mu.Lock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.c)
	}
	b.mu.Unlock()
}

// Publish delivers e to every subscriber without blocking. A zero Time is
// set to now.
func (b *Bus) Publish(e Event) {
	if b == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = clock.Or(b.Clock).Now()
	}
	b.mu.RLock()
	for s := range b.subs {
		select {
		case s.c <- e:
		default:
			b.dropped.Add(1)
		}
	}
	b.mu.RUnlock()
}

// Dropped returns how many deliveries were dropped because a subscriber
// was full.
func (b *Bus) Dropped() uint64 {
	if b == nil {
		return 0
	}
	return b.dropped.Load()
}

// The outcomes of a request (Event.Outcome on RequestFinished), the one
// vocabulary of the metrics, the dashboard, the incident log and the
// request log.
const (
	OutcomeReleased  = "released"  // the first attempt passed
	OutcomeRepaired  = "repaired"  // a hidden retry passed
	OutcomeHalted    = "halted"    // stopped with an aegis_<reason> error
	OutcomeBlocked   = "blocked"   // the input was refused before generation
	OutcomeCancelled = "cancelled" // the client went away
	OutcomeRejected  = "rejected"  // a request error: bad JSON, unknown model, the upstream's 4xx
	OutcomeRedacted  = "redacted"  // an MCP tool result forwarded with its secrets replaced
)
