package llm

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/llamaserver"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Config configures the "guard_llm" validator.
type Config struct {
	// URL is the guard server's base URL (loopback).
	URL string `json:"url" yaml:"url"`
	// Kind is "llama-server" (or "llama") or "ollama", as for an upstream.
	Kind string `json:"kind" yaml:"kind"`
	// Model is the Ollama model name.
	Model string `json:"model" yaml:"model"`
	// Task is safety, injection, drift or tool_call (default safety).
	Task string `json:"task" yaml:"task"`
	// Deadline bounds every guard call, and how long after the end of the
	// output the final verdict may take (default 2s).
	Deadline time.Duration `json:"deadline" yaml:"deadline"`
	// FailOpen is what the guard does with text it could not judge in time
	// when no policy says (a guard built outside a pipeline): true lets it
	// go, false (the default) holds it. Either way the text is reported
	// with a guard_unavailable finding. In a policy, the rule for
	// guard_unavailable alone decides (validator.Request.Unjudged), and a
	// fail_open key in the check's configuration is a shorthand for it.
	FailOpen bool `json:"fail_open" yaml:"fail_open"`
	// Schedule is when the guard is asked while the output streams:
	// adaptive (the default: the prompt's fixed part is prefilled as the
	// request goes upstream, the first verdict is asked for as soon as
	// there is text, then one call at a time covers all new text, a
	// verdict when one is due by the guard's measured decode speed, else a
	// prefill) or fixed (every cadence_tokens).
	Schedule string `json:"schedule" yaml:"schedule"`
	// CadenceTokens asks for a verdict every this many tokens (counted as
	// 4 bytes each) or at the first sentence end after half of it
	// (default 64), with schedule fixed. While a call is in flight new
	// text waits for the next one (the guard is never queued up when it is
	// saturated).
	CadenceTokens int `json:"cadence_tokens" yaml:"cadence_tokens"`
	// IDSlot pins the llama-server slot whose KV cache keeps the prompt
	// prefix warm (-1: any slot; default 0).
	IDSlot *int `json:"id_slot" yaml:"id_slot"`
	// Protocol is the guard model's own prompt and answer format: auto
	// (the default: detected from the server's model, /props on
	// llama-server, /api/show on Ollama), llama-guard, qwen3guard,
	// granite-guardian, shieldgemma, or verdict-json (Aegis' generic
	// prompt, for general instruct models).
	Protocol string `json:"protocol" yaml:"protocol"`
	// Risk is the Granite Guardian risk to ask about (harm by default,
	// jailbreak for the injection task).
	Risk string `json:"risk" yaml:"risk"`
	// Policies are the ShieldGemma policies to judge against (dangerous,
	// harassment, hate, sexual; all four by default).
	Policies []string `json:"policies" yaml:"policies"`
	// Controversial is what Qwen3Guard's Controversial answer means: fail
	// (the default, its card's strict mode) or pass (loose mode).
	Controversial string `json:"controversial" yaml:"controversial"`
	// PrefillOnly, when true, sends only cache-warming prefill requests
	// while the output streams and asks for the verdict once at the end;
	// output is then held back until that verdict.
	PrefillOnly bool `json:"prefill_only" yaml:"prefill_only"`
	// NATS sends the guard calls to guard workers over NATS (aegis
	// guard-worker) instead of to URL; Model then names the workers'
	// model. With URL also set, that server answers while NATS is
	// unreachable.
	NATS string `json:"nats" yaml:"nats"`
	// Device labels the calls in metrics and the dashboard (see Call);
	// set by aegis serve for the guard server it supervises, never read
	// from a policy.
	Device string `json:"-" yaml:"-"`
}

// Register adds the check to r.
func Register(r *validator.Registry) {
	r.Register(validator.Spec{
		Name:    "guard_llm",
		Summary: "a small guard model on a local llama-server or Ollama judges the output",
		Doc: `Asks a guard model on its own server for a grammar-constrained verdict (safety, injection,
drift or tool-call plausibility) while the output streams and at its end. With schedule adaptive
(the default) the prompt's fixed part is prefilled as the request goes upstream, the first
verdict is asked for as soon as there is text, and then one call at a time covers all the text
that came while the last one ran: a verdict when one is due by the guard's measured decode
speed (from its own timings), else a prefill that keeps the cached prompt at most one call
behind, so the text left to judge at the end is what came during one call. With schedule fixed
it asks at sentence ends / every cadence_tokens tokens. Calls run in the background; Write never
blocks. Settled advances to the end of
the last text the guard passed, so the unjudged tail is held back. On llama-server the risk
comes from the verdict token's probability (n_probs) and the prompt prefix stays cached in the
pinned id_slot. Text a call could not judge (it failed or outlived the deadline) is reported
with a guard_unavailable finding, and the policy's rule for guard_unavailable decides: release
lets it go with the finding as a note, halt holds it and stops the response (fail_open here is
a shorthand for that rule). Guard models are asked in their
own protocol (protocol: llama-guard, qwen3guard, granite-guardian, shieldgemma; auto detects it
from the server's model; verdict-json is the generic prompt for general instruct models); their
categories are carried in the finding. With nats set, the calls go to guard
workers (aegis guard-worker) over NATS under the same rules; url, if also set, answers while
NATS is unreachable.`,
		Reasons: []validator.Reason{validator.ReasonUnsafeContent, validator.ReasonPromptInjection,
			validator.ReasonInstructionDrift, validator.ReasonMalformedToolCall, validator.ReasonGuardUnavailable},
		Example: "url: http://127.0.0.1:8081\nkind: llama-server\nprotocol: auto\ntask: safety\ndeadline: 2s\nfail_open: false\nschedule: adaptive\nid_slot: 0\n",
		Config:  func() any { return &Config{} },
		New: func(cfg any, req *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*Config)
			if c == nil || c.URL == "" && c.NATS == "" {
				return nil, fmt.Errorf("guard_llm: url or nats is required")
			}
			return New(*c, req, nil)
		},
	})
}

// sharedHTTP is used by every guard_llm validator: connections to the
// guard server are reused across attempts.
var sharedHTTP = llamaserver.Shared

// Guard is the guard_llm validator for one attempt.
type Guard struct {
	proto     Protocol // as configured; auto is resolved per server
	user      string   // the last user message, for response moderation
	requestID string   // the response judged (validator.Request), for a worker's log
	attempt   int
	judge     Judge // the guard server's client, or a remote judge (Config.NATS)
	task      Task
	context   string
	cfg       Config
	clk       clock.Clock // nil: the pipeline's last Tick
	// ownDeadlineOnly: calls end at the guard's deadline by its clock,
	// never by a wall-clock timer (NewWithJudge).
	ownDeadlineOnly bool
	cadence         int
	sched           Schedule
	speed           *speed    // the guard server's measured speed (adaptive)
	started         bool      // Start ran
	verdicts        int       // verdict calls started
	lastAsk         time.Time // when the last verdict call started
	askedV          int       // end of the text of the last verdict call
	mu              sync.Mutex
	buf             []byte
	// calls is the text of the tool calls the model made (their decoded
	// argument values), judged with the output by the final call; callAt
	// names the one call when there is one.
	calls     string
	callCount int
	callAt    string
	settled   int
	asked     int // end of the text of the last call started
	findings  []validator.Finding
	notes     []validator.Finding // text let go unjudged (fail open)
	closed    bool
	done      bool // final verdict in (or deadline passed) after Close
	inflight  *call
	wg        sync.WaitGroup
	notify    func()
	lastTick  time.Time // the pipeline's time, when no clock was given
	closedAt  time.Time
	stopped   bool
}

type call struct {
	end      int
	started  time.Time
	deadline time.Time
	cancel   context.CancelFunc
	final    bool
	prefill  bool
	timedOut bool
	calls    bool // the tool calls were judged with the text
}

// New builds a guard_llm validator. clk is the clock; nil means the time
// of the pipeline's last Tick (the wall clock before the first).
func New(c Config, req *validator.Request, clk clock.Clock) (*Guard, error) {
	return newGuard(c, req, clk, nil)
}

// NewWithJudge builds a guard_llm validator whose calls go to j instead
// of a guard server (c.URL and c.NATS are not used): the guard's own
// scheduling, deadlines and verdict handling, with another judge, such
// as a scripted one in tests.
func NewWithJudge(c Config, req *validator.Request, clk clock.Clock, j Judge) (*Guard, error) {
	if j == nil {
		return nil, fmt.Errorf("guard_llm: no judge")
	}
	g, err := newGuard(c, req, clk, j)
	if err != nil {
		return nil, err
	}
	// The guard's own deadline (its clock, or the pipeline's ticks) cancels
	// such a judge; a wall-clock timer would end a scripted call whenever
	// a busy machine stalls the test between two steps.
	g.ownDeadlineOnly = true
	return g, nil
}

func newGuard(c Config, req *validator.Request, clk clock.Clock, j Judge) (*Guard, error) {
	kind, err := ParseKind(c.Kind)
	if err != nil {
		return nil, fmt.Errorf("guard_llm: %w", err)
	}
	task := TaskSafety
	if c.Task != "" {
		if task, err = ParseTask(c.Task); err != nil {
			return nil, fmt.Errorf("guard_llm: %w", err)
		}
	}
	if c.Deadline <= 0 {
		c.Deadline = 2 * time.Second
	}
	if c.CadenceTokens <= 0 {
		c.CadenceTokens = 64
	}
	slot := 0
	if c.IDSlot != nil {
		slot = *c.IDSlot
	}
	proto, err := ParseProtocol(c.Protocol)
	if err != nil {
		return nil, fmt.Errorf("guard_llm: %w", err)
	}
	sched, err := ParseSchedule(c.Schedule)
	if err != nil {
		return nil, fmt.Errorf("guard_llm: %w", err)
	}
	if proto != ProtocolAuto && proto != ProtocolVerdictJSON && (task == TaskDrift || task == TaskToolCall) {
		return nil, fmt.Errorf("guard_llm: protocol %s judges safety; task %s needs protocol verdict-json", proto, task)
	}
	if c.Controversial != "" && c.Controversial != "fail" && c.Controversial != "pass" {
		return nil, fmt.Errorf("guard_llm: controversial is fail or pass, not %q", c.Controversial)
	}
	if c.Risk != "" {
		if _, ok := graniteRisks[c.Risk]; !ok {
			return nil, fmt.Errorf("guard_llm: unknown risk %q (want one of %v)", c.Risk, GraniteRisks())
		}
	}
	for _, p := range c.Policies {
		if !isIn(p, ShieldPolicies()) {
			return nil, fmt.Errorf("guard_llm: unknown policy %q (want some of %v)", p, ShieldPolicies())
		}
	}
	c.FailOpen = req.ReleasesUnjudged(c.FailOpen) // the policy's rule, when there is one
	g := &Guard{
		proto:   proto,
		task:    task,
		cfg:     c,
		clk:     clk,
		cadence: 4 * c.CadenceTokens,
		sched:   sched,
		speed:   speedOf(c.URL + " " + c.NATS + " " + c.Model),
	}
	var local Judge
	if j != nil {
		local = j
	} else if c.URL != "" {
		local = &Client{BaseURL: c.URL, Kind: kind, Model: c.Model, Slot: slot, HTTP: sharedHTTP}
	}
	g.judge = local
	if j == nil && c.NATS != "" && Remote != nil { // without Remote (not aegis serve), url alone answers
		if g.judge, err = Remote(c, local); err != nil {
			return nil, fmt.Errorf("guard_llm: %w", err)
		}
	}
	if g.judge == nil {
		return nil, fmt.Errorf("guard_llm: nats is reached by aegis serve only; give url too")
	}
	if req != nil {
		g.requestID, g.attempt = req.ID, req.Attempt
		for _, m := range req.Messages {
			if m.Role == "user" {
				g.user = m.Content
			}
		}
	}
	if req != nil && (task == TaskDrift || task == TaskToolCall) {
		g.context = req.System()
		for _, m := range req.Messages {
			if m.Role == "user" {
				g.context += "\nuser: " + m.Content
			}
		}
	}
	return g, nil
}

func (g *Guard) Name() string { return "guard_llm" }

// timeLocked is the guard's notion of now. g.mu is held.
func (g *Guard) timeLocked() time.Time {
	switch {
	case g.clk != nil:
		return g.clk.Now()
	case !g.lastTick.IsZero():
		return g.lastTick
	}
	return time.Now()
}

// Notify sets the function called after a background call changed the
// guard's state (validator.Background).
func (g *Guard) Notify(f func()) {
	g.mu.Lock()
	g.notify = f
	g.mu.Unlock()
}

// Stop cancels the call in flight and waits for its goroutine.
func (g *Guard) Stop() {
	g.mu.Lock()
	g.stopped = true
	if g.inflight != nil {
		g.inflight.cancel()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// Write appends output and, at a cadence point with no call in flight,
// starts a background call. It never waits for the guard.
func (g *Guard) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.buf = append(g.buf, p...)
	if g.closed || len(g.findings) > 0 || g.inflight != nil {
		return len(p), nil // a busy guard's next call covers this text too
	}
	g.maybeStartLocked()
	return len(p), nil
}

// Start prefills the fixed part of the guard's prompt (instructions,
// context, the user's message) in the background, with schedule adaptive,
// so the server has it cached by the time the first output arrives: it
// runs while the main model prefills its own prompt.
func (g *Guard) Start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sched != ScheduleAdaptive || g.started || g.closed || g.inflight != nil || len(g.findings) > 0 {
		return
	}
	g.started = true
	g.startLocked(false, true)
}

// maybeStartLocked starts a call on everything not asked about yet when
// the schedule says so. g.mu is held.
func (g *Guard) maybeStartLocked() {
	n := len(g.buf) - g.asked
	if g.sched == ScheduleFixed {
		if n >= g.cadence || (n >= g.cadence/2 && endsSentence(g.buf)) {
			g.startLocked(false, g.cfg.PrefillOnly)
		}
		return
	}
	if len(g.buf) > g.askedV && g.verdictDueLocked() {
		g.startLocked(false, false) // also when all of it is prefilled
		return
	}
	if n > 0 && n >= g.speed.minPrefillBytes() {
		g.startLocked(false, true)
	}
}

// verdictDueLocked reports whether the next call should be a verdict: the
// first one as soon as there is text (the client waits for it in
// watermark release), then one per verdictEvery. g.mu is held.
func (g *Guard) verdictDueLocked() bool {
	if g.cfg.PrefillOnly {
		return false
	}
	return g.verdicts == 0 || !g.timeLocked().Before(g.lastAsk.Add(g.speed.verdictEvery()))
}

func endsSentence(b []byte) bool {
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		switch b[i] {
		case '.', '!', '?', '\n':
			return true
		case ' ', '"', ')':
			continue
		}
		return false
	}
	return false
}

// startLocked starts a call on the text so far: a verdict, or a prefill
// that only warms the server's cache. A call after the end of the output
// must answer within the deadline of the end, however long the calls
// before it took. g.mu is held.
func (g *Guard) startLocked(final, prefill bool) {
	end := len(g.buf)
	now := g.timeLocked()
	deadline := now.Add(g.cfg.Deadline)
	if g.closed && deadline.After(g.closedAt.Add(g.cfg.Deadline)) {
		deadline = g.closedAt.Add(g.cfg.Deadline)
	}
	prefill = prefill && !final
	c := &call{end: end, started: now, deadline: deadline, final: final, prefill: prefill}
	if !prefill {
		g.verdicts++
		g.lastAsk, g.askedV = now, end
	}
	if g.stopped || !now.Before(deadline) {
		g.asked = end
		c.cancel = func() {}
		g.unavailableLocked(c, fmt.Sprintf("deadline %s passed", g.cfg.Deadline))
		g.done = g.closed
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline.Sub(now))
	if g.ownDeadlineOnly {
		ctx, cancel = context.WithCancel(context.Background())
	}
	c.cancel = cancel
	g.inflight = c
	g.asked = end
	text := string(g.buf[:end])
	if final && g.calls != "" {
		text += g.calls
		c.calls = true
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer cancel()
		now := time.Now
		if g.clk != nil {
			now = g.clk.Now
		}
		t0 := now()
		res, err := g.call(ctx, c, text)
		took := now().Sub(t0)
		if !c.prefill {
			g.observe(res, err, took)
		}
		if err == nil && res != nil {
			// The call's overhead is its time less the server's own
			// timings, so both must be on one clock: the guard's, when it
			// has one (a fake clock in tests, where a server's timings are
			// too), else the client's wall-clock measure.
			if res.Elapsed == 0 || g.clk != nil {
				res.Elapsed = took
			}
			g.speed.observe(res)
		}
		g.finish(c, res, err)
	}()
}

// call runs one guard call on text in the configured protocol: a
// cache-warming prefill or a verdict.
func (g *Guard) call(ctx context.Context, c *call, text string) (*Result, error) {
	s := g.subject(text)
	j := Judgement{Protocol: g.proto.String(), Task: g.task.String(), Context: g.context,
		User: s.User, Text: text, Risk: s.Risk, Policies: s.Policies, Loose: s.Loose, Prefill: c.prefill,
		RequestID: g.requestID, Attempt: g.attempt}
	judge := func(ctx context.Context) (*Result, error) {
		if cl, ok := g.judge.(*Client); ok {
			return cl.judge(ctx, j) // with a prefill's timings, for the schedule
		}
		return g.judge.Judge(ctx, j)
	}
	if Trace == nil {
		return judge(ctx)
	}
	ctx, end := Trace(ctx, j, g.cfg)
	res, err := judge(ctx)
	end(res, err)
	return res, err
}

// Trace, when set, starts the span of one guard call (j, made as c
// configures) and returns the context to make it in and the function
// that ends the span with the call's result. Nil, the default, is
// tracing off.
var Trace func(ctx context.Context, j Judgement, c Config) (context.Context, func(*Result, error))

// subject is what a native-protocol call judges: the response so far,
// as the answer to the last user message.
func (g *Guard) subject(text string) Subject {
	s := Subject{Mode: ModeResponse, User: g.user, Text: text, Risk: g.cfg.Risk, Policies: g.cfg.Policies,
		Loose: g.cfg.Controversial == "pass"}
	if s.Risk == "" && g.task == TaskInjection {
		s.Risk = "jailbreak"
	}
	return s
}

// resolved caches auto-detected protocols per server and model.
var resolved sync.Map // "url model" -> Protocol

// resolveCached resolves auto once per guard server and model.
func resolveCached(ctx context.Context, c *Client, p Protocol) (Protocol, error) {
	if p != ProtocolAuto {
		return p, nil
	}
	key := c.BaseURL + " " + c.Model
	if v, ok := resolved.Load(key); ok {
		return v.(Protocol), nil
	}
	p, err := c.Resolve(ctx, p)
	if err != nil {
		return 0, err
	}
	resolved.Store(key, p)
	return p, nil
}

// wake tells the pipeline the guard's state changed. g.mu is not held.
func (g *Guard) wake() {
	g.mu.Lock()
	f := g.notify
	g.mu.Unlock()
	if f != nil {
		f()
	}
}

// finish records a call's outcome and wakes the pipeline.
func (g *Guard) finish(c *call, res *Result, err error) {
	g.mu.Lock()
	if g.inflight != c || c.timedOut || g.stopped {
		g.mu.Unlock()
		return // superseded, already judged by Tick, or abandoned
	}
	g.finishLocked(c, res, err)
	g.mu.Unlock()
	g.wake()
}

func (g *Guard) finishLocked(c *call, res *Result, err error) {
	g.inflight = nil
	switch {
	case err != nil:
		g.unavailableLocked(c, err.Error())
	case c.prefill:
		// Warmed the cache; nothing judged.
	case res == nil || res.Verdict == nil:
		g.unavailableLocked(c, "the guard answered without a verdict")
	case res.Verdict.Verdict == validator.Fail && res.Protocol != ProtocolAuto:
		g.findings = append(g.findings, nativeFinding(res.Protocol, g.subject(""), res, g.settled, max(c.end, g.settled+1)))
	case res.Verdict.Verdict == validator.Fail:
		// The verdict's risk is the policy's for the reason; the model's own
		// risk word here would contradict it ("risk medium" in a high-risk
		// verdict), so the finding gives the model's probability instead.
		msg := fmt.Sprintf("guard model (%s) answered fail: %s", g.task, res.Verdict.Reason)
		if res.HasProbs {
			msg += probNote(res.PFail, "fail", "pass")
		}
		f := validator.Finding{
			Check: "guard_llm", Reason: res.Verdict.Reason, Start: g.settled, End: max(c.end, g.settled+1),
			Message: msg, Hint: res.Verdict.Action,
		}
		if c.calls {
			f.Message += " on the output and its tool calls"
			f.Path = g.callAt
		}
		g.findings = append(g.findings, f)
	default:
		g.settled = max(g.settled, c.end)
	}
	if c.final || (g.closed && len(g.findings) > 0) {
		g.done = true
		return
	}
	if g.closed && !g.done {
		if g.settled >= len(g.buf) && (g.calls == "" || c.calls) {
			g.done = true
			return
		}
		g.startLocked(true, false)
		return
	}
	if !g.closed && len(g.findings) == 0 {
		g.maybeStartLocked() // the text that came while the guard was busy
	}
}

// unavailableLocked reports the text of call c, which the guard could not
// judge, with a guard_unavailable finding: failing open, the text is let
// go and the finding is a note (the verdict says the text went out
// unjudged); failing closed, the text stays held and the finding fails
// the output.
func (g *Guard) unavailableLocked(c *call, why string) {
	f := validator.Finding{Check: "guard_llm", Reason: validator.ReasonGuardUnavailable, Start: g.settled, End: max(c.end, g.settled+1),
		Message: "guard model gave no verdict in time: " + why}
	if !g.cfg.FailOpen {
		g.findings = append(g.findings, f)
		return
	}
	if c.prefill || c.end <= g.settled {
		return // nothing was to be judged
	}
	f.End = c.end
	g.settled = c.end
	if n := len(g.notes); n > 0 && g.notes[n-1].End >= f.Start {
		g.notes[n-1].End = f.End // one note for text let go in a row
		return
	}
	g.notes = append(g.notes, f)
}

func (g *Guard) Settled() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.settled
}

func (g *Guard) Findings() []validator.Finding {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.notes) == 0 {
		return append([]validator.Finding(nil), g.findings...)
	}
	return append(append([]validator.Finding(nil), g.findings...), g.notes...)
}

// Close marks the end of the output and asks for the final verdict in the
// background (after the call in flight, if any, reports).
func (g *Guard) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	g.closedAt = g.timeLocked()
	if len(g.findings) > 0 {
		g.done = true
		return
	}
	if g.inflight == nil {
		if g.settled >= len(g.buf) && g.calls == "" {
			g.done = true
			return
		}
		g.startLocked(true, false)
	}
}

// CheckToolCall implements validator.ToolCallChecker: the call's decoded
// argument values are judged with the output by the final call (its
// finding is reported by Findings, at tool_calls/N when there is one
// call). A call made after Close is not judged.
func (g *Guard) CheckToolCall(c validator.ToolCall) []validator.Finding {
	var b strings.Builder
	b.WriteString("\n[tool call ")
	b.WriteString(c.Name)
	b.WriteString("]")
	for _, v := range toolcalls.Of(c).Values {
		b.WriteString("\n")
		if v.Path != "" {
			b.WriteString(v.Path)
			b.WriteString(": ")
		}
		b.WriteString(v.Text)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.calls += b.String()
	g.callCount++
	g.callAt = "tool_calls"
	if g.callCount == 1 {
		g.callAt = "tool_calls/" + strconv.Itoa(c.Index)
	}
	return nil
}

// Done reports whether the final verdict is in (after Close).
func (g *Guard) Done() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done
}

// Tick enforces the deadline: a call older than the deadline is cancelled
// and judged unavailable now, whether or not its goroutine has returned.
func (g *Guard) Tick(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.After(g.lastTick) {
		g.lastTick = now
	}
	c := g.inflight
	if c == nil && g.sched == ScheduleAdaptive && !g.closed && len(g.findings) == 0 {
		g.maybeStartLocked() // a verdict fell due while no text came
		return
	}
	if c == nil || now.Before(c.deadline) {
		return
	}
	c.timedOut = true
	c.cancel()
	g.inflight = nil
	g.unavailableLocked(c, fmt.Sprintf("deadline %s passed", g.cfg.Deadline))
	if c.final || (g.closed && len(g.findings) > 0) {
		g.done = true
		return
	}
	if g.closed && !g.done {
		if g.cfg.FailOpen && g.settled >= len(g.buf) {
			g.done = true
			return
		}
		g.startLocked(true, false)
		return
	}
	if !g.closed && len(g.findings) == 0 {
		g.maybeStartLocked()
	}
}

// NextDeadline is when the call in flight times out; when idle with text
// no verdict was asked about (schedule adaptive), when the next one is due;
// zero otherwise.
func (g *Guard) NextDeadline() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight == nil {
		if g.sched == ScheduleAdaptive && !g.closed && len(g.findings) == 0 && len(g.buf) > g.askedV && !g.cfg.PrefillOnly && g.verdicts > 0 {
			return g.lastAsk.Add(g.speed.verdictEvery())
		}
		return time.Time{}
	}
	return g.inflight.deadline
}

// Wait blocks until every background call has returned (tests and
// shutdown; calls end by their deadline at the latest).
func (g *Guard) Wait() { g.wg.Wait() }

var (
	_ validator.Validator  = (*Guard)(nil)
	_ validator.Ticker     = (*Guard)(nil)
	_ validator.Background = (*Guard)(nil)
)

// observe tells the call observers (ObserveCalls) of one verdict call.
func (g *Guard) observe(res *Result, err error, d time.Duration) {
	c := Call{Device: deviceLabel(g.cfg), RequestID: g.requestID, Attempt: g.attempt, Duration: d, Err: err}
	if err == nil && res != nil && res.Verdict != nil {
		v := *res.Verdict
		c.Verdict = &v
	}
	observeCall(c)
}

// probNote says what a verdict's probability is of, so a fail with a
// small number does not read as a contradiction: it is the probability of
// the failing word against the passing one at the token that decided,
// summed over the tokens that start each word; the answer is the most
// likely single token under the grammar, which can be the failing word
// even when the passing word, split over more tokens, holds more in sum.
func probNote(p float64, fail, pass string) string {
	return fmt.Sprintf(" (probability of %q over %q at the deciding token: %.2f)", fail, pass, p)
}
