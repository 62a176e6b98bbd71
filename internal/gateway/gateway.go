package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aegis-sentinel/aegis/internal/approval"
	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Defaults for the limits a zero Gateway uses.
const (
	DefaultMaxBodyBytes = 4 << 20
	DefaultMaxJSONDepth = 64
	DefaultMaxAttempts  = 4
	DefaultIdleTimeout  = 2 * time.Minute
)

// Checker is what the gateway needs from the checks of one attempt: a
// Stepper that takes the output, and, once the attempt ends, its verdict.
// *pipeline.Attempt implements it; see pipeline.Step for the protocol.
type Checker interface {
	Stepper
	Verdict(attempt int) validator.Verdict
	// Mode is the release mode the attempt resolved (optimistic release
	// sends text before the checks cleared it).
	Mode() policy.Mode
	// Stop abandons the background judgements in flight.
	Stop()
}

// Stepper takes an attempt's output, tool calls and time, and says after
// each what the gateway may release (pipeline.Step).
type Stepper interface {
	Feed(p []byte, at time.Time) pipeline.Step
	// FeedReasoning feeds a piece of the model's reasoning: held and
	// checked as text is, located at "reasoning" in findings.
	FeedReasoning(p []byte, at time.Time) pipeline.Step
	// Progress tells the checks the upstream made progress without text
	// (output: a tool call's piece; else a sign of work on the prompt).
	Progress(at time.Time, output bool) pipeline.Step
	ToolCall(c validator.ToolCall)
	Tick(now time.Time) pipeline.Step
	CloseAt(now time.Time) pipeline.Step
	Fail(f validator.Finding, now time.Time) pipeline.Step
	// Notify receives when a background check reported something.
	Notify() <-chan struct{}
}

// Gateway serves the guarded API. Set its fields before the first
// request; they must not change afterwards.
type Gateway struct {
	// Upstreams are the model servers, in routing order. Required.
	Upstreams []*upstream.Upstream

	// Route picks the upstream for a model name. Nil means the first
	// upstream whose Models include the name (or that lists no models);
	// a nil upstream and nil error means "unknown model" (404).
	Route func(model string) (*upstream.Upstream, error)

	// Policy selects the checks and the actions. Nil means policy.Default(),
	// over the checks registered in validator.Default (checks.RegisterDefault
	// registers the built-in ones).
	Policy *policy.Policy

	// NewChecker builds the checks of one attempt. Nil means
	// pipeline.New over Policy with Registry and Now. Checks enter through
	// the policy (policy.With for one built at run time, as a guard).
	NewChecker func(req *validator.Request) (Checker, error)

	// Registry resolves the checks compiled from the prompt. Nil means the
	// policy's registry.
	Registry *validator.Registry

	// InputCheck judges the request before any upstream call (the guard's
	// prompt-injection classifier). A failing verdict with action block
	// answers 403 without calling the upstream. Nil means no input check.
	InputCheck func(ctx context.Context, req *validator.Request) *validator.Verdict

	// Approvals holds the tool calls the policy sends to a person (action:
	// approve) until someone decides. Nil means nobody can: such calls
	// are refused.
	Approvals *approval.Queue

	// Events receives the request lifecycle. Nil means none.
	Events *events.Bus

	// AllowManagement lets Ollama's model management endpoints (pull,
	// push, copy, delete, create, blobs) through; by default they are
	// refused with 403 management_refused.
	AllowManagement bool

	// AuthToken, when set, is the bearer token every request must carry
	// (GET /health excepted).
	AuthToken string

	// MaxBodyBytes limits request bodies; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxJSONDepth limits the nesting of request JSON; zero means
	// DefaultMaxJSONDepth.
	MaxJSONDepth int
	// MaxAttempts caps the attempts per request whatever the policy's
	// retry budgets say; zero means DefaultMaxAttempts.
	MaxAttempts int
	// IdleTimeout is the stall deadline used when the checks set none
	// (no stall check enabled): the longest wait for the next chunk.
	// Zero means DefaultIdleTimeout; negative disables it.
	IdleTimeout time.Duration

	// BodyReadTimeout bounds reading one request body; zero means
	// DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// ClientWriteTimeout bounds one write to a client that does not read;
	// zero means DefaultClientWriteTimeout.
	ClientWriteTimeout time.Duration
	// MaxConcurrentStreams caps the generating requests in flight (503
	// past it); zero means DefaultMaxConcurrentStreams.
	MaxConcurrentStreams int
	// KeepAlive is the silence after which a streamed answer whose text
	// is held (a guard judging, a JSON answer buffered, a hidden retry)
	// gets a Server-Sent Events comment line; zero means
	// DefaultKeepAlive, negative none. Ollama's NDJSON streams get none.
	KeepAlive time.Duration
	// MaxResponseBytes caps the output text one response may hold; past
	// it the response halts with length_exceeded. Zero means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int

	// WorkProbe is how often an attempt that has heard nothing from its
	// upstream yet asks it whether it is working on the prompt
	// (llama-server's GET /slots, Ollama's GET /api/ps): an answer that
	// says so counts as progress, so the stall check's ttft and the idle
	// timeout never halt a prompt the upstream is still processing. Zero
	// means DefaultWorkProbe, negative never.
	WorkProbe time.Duration
	// MaxPromptWait bounds how long such answers keep an attempt waiting
	// for its first event; zero means DefaultMaxPromptWait.
	MaxPromptWait time.Duration

	streamsOnce sync.Once
	streams     chan struct{}

	// Clock is the time source of every request's lifecycle (arrival
	// times, the idle timer, the checks' wake-ups). Nil means clock.Real.
	Clock clock.Clock

	// readHook, when set, is called after the upstream reader queued a
	// payload (tests pace a fake clock with it).
	readHook func()
	// waitHook, when set, is called each time an attempt's loop is about
	// to wait for what happens next, with where the loop is: tests move a
	// fake clock only once the gateway has taken in what the reader
	// queued and armed the timers they expect.
	waitHook func(loopState)
	// closeHook, when set, is called each time an attempt's reader has
	// closed the upstream's response (after reading a finished stream's
	// body to its end, which gives the connection back to the pool).
	closeHook func()

	kinds kinds // detection of upstreams down at start (detect.go)

	// ErrorLog receives operational errors (never prompts or outputs
	// unless the policy's log_text is set). Nil means the log package's
	// standard logger.
	ErrorLog *log.Logger
}

func (g *Gateway) clock() clock.Clock { return clock.Or(g.Clock) }

func (g *Gateway) now() time.Time { return g.clock().Now() }

func (g *Gateway) policy() *policy.Policy {
	if g.Policy != nil {
		return g.Policy
	}
	return defaultPolicy()
}

var defaultPolicy = sync.OnceValue(policy.Default) // built once

func (g *Gateway) logf(format string, args ...any) {
	if g.ErrorLog != nil {
		g.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

func (g *Gateway) maxBody() int64 {
	if g.MaxBodyBytes > 0 {
		return g.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

func (g *Gateway) maxDepth() int {
	if g.MaxJSONDepth > 0 {
		return g.MaxJSONDepth
	}
	return DefaultMaxJSONDepth
}

func (g *Gateway) maxAttempts() int {
	if g.MaxAttempts > 0 {
		return g.MaxAttempts
	}
	return DefaultMaxAttempts
}

func (g *Gateway) idleTimeout() time.Duration {
	switch {
	case g.IdleTimeout < 0:
		return 0
	case g.IdleTimeout == 0:
		return DefaultIdleTimeout
	}
	return g.IdleTimeout
}

func (g *Gateway) newChecker(req *validator.Request) (Checker, error) {
	if g.NewChecker != nil {
		return g.NewChecker(req)
	}
	return pipeline.New(g.policy(), req, pipeline.Options{Clock: g.clock(), Registry: g.Registry})
}

func (g *Gateway) route(model string) (*upstream.Upstream, error) {
	if g.Route != nil {
		return g.Route(model)
	}
	for _, u := range g.Upstreams {
		if u.Serves(model) {
			return u, nil
		}
	}
	return nil, nil
}

// fallback returns another upstream that serves model, for the stall
// retry, or u itself.
func (g *Gateway) fallback(u *upstream.Upstream, model string) *upstream.Upstream {
	for _, o := range g.Upstreams {
		if o != u && o.Kind == u.Kind && o.Serves(model) {
			return o
		}
	}
	return u
}

// newRequestID returns a random request id.
func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return "aegis-" + hex.EncodeToString(b[:])
}

// kinds detects, on first contact, the kind of upstreams that were down
// when the gateway started (Kind left KindUnknown), so Aegis can start
// before its model server. Until an upstream answers, requests go to it
// as to an OpenAI-compatible server and fail as unreachable.
type kinds struct {
	once    sync.Once
	pending atomic.Bool
	mu      sync.Mutex
}
