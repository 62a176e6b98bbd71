// Package pipeline runs the checks of one attempt over the streamed output
// and computes the release point: the offset up to which text may be given
// to the client.
//
// An Attempt is built from the policy (its enabled checks), the request
// (each check decides whether it applies) and the constraints compiled from
// the prompt. Text is fed with Write as it streams; the release point is
// the smallest offset that every check has settled, adjusted by the release
// mode: buffer releases nothing until the output is complete and passed,
// optimistic releases at once. After the first failing finding the attempt
// stops feeding the checks (unless Options.Complete) and the release point
// freezes, so nothing after the failure reaches the client.
//
// An Attempt is used by one goroutine at a time.
package pipeline

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/constraints"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Options refine an Attempt. The zero value is ready to use.
type Options struct {
	// Clock is the clock of the methods that take no time (Write,
	// Close); nil means the wall clock. Feed, Tick, Fail and CloseAt take
	// the time from the caller.
	Clock clock.Clock
	// Registry resolves the checks compiled from the prompt; nil means the
	// policy's registry (validator.Default for the default policy).
	Registry *validator.Registry
	// Complete keeps feeding every check after a failure, so Findings
	// holds everything the output breaks (aegis check). The release point
	// still freezes at the first failure, and the attempt is done only
	// once every background check has answered.
	Complete bool
}

// State is where an attempt is in its life.
type State int

// The states of an attempt: feeding while output arrives, closing after
// the last token while background checks (the guard model) still owe a
// verdict, done once the verdict is known.
const (
	Feeding State = iota
	Closing
	Done
)

func (s State) String() string {
	switch s {
	case Feeding:
		return "feeding"
	case Closing:
		return "closing"
	case Done:
		return "done"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Step is what the caller may do after Feed, Tick, Fail or CloseAt: give
// the client the output up to Release; stop when State is Done (Verdict
// then gives the verdict, a failure when Failed); otherwise call Tick at
// Wake (zero: no timed wake-up is needed) or when Notify's channel
// receives.
type Step struct {
	Release int
	State   State
	Failed  bool
	Wake    time.Time
}

// Attempt is the checking state of one attempt at generating a response.
type Attempt struct {
	pol      *policy.Policy
	now      func() time.Time
	mode     policy.Mode
	complete bool

	vs       []validator.Validator
	bg       []bool // vs[i] is a Background check
	tickers  []validator.Ticker
	watchers []validator.ProgressWatcher
	toolChks []validator.ToolCallChecker
	// req and argReaders serve the checks that read tool-call arguments.
	req        *validator.Request
	argReaders []argReader
	// argSegs and argBuf are argText's, reused call after call.
	argSegs []segment
	argBuf  []byte
	bgs     []validator.Background
	notify  chan struct{}

	// fed is how much output was fed: the text itself is the caller's
	// (the gateway keeps it once) and each check's own.
	fed       int
	toolFinds []validator.Finding
	own       []validator.Finding // the caller's and max_hold's findings
	failed    bool
	closed    bool
	state     State
	frozen    int
	released  int
	ticked    time.Time // the time the tickers were last told

	// reasoning are the ranges of the output that are the model's
	// reasoning (reasoning.go); feeding says the piece being fed is.
	reasoning []span
	feeding   bool

	// arrivals are the pieces of output not yet released, with when they
	// arrived (for max_hold).
	arrivals []arrival
	maxHold  time.Duration
	held     int // offset up to which max_hold released unjudged text
	heldNote int // 1 + the index in own of the max_hold finding
}

type arrival struct {
	end int
	at  time.Time
}

// New builds the attempt's checks: the policy's enabled checks that apply
// to req and the checks compiled from the prompt (when the policy allows).
// Every check enters through the policy (policy.With for one built at run
// time, as a guard). It ticks Tickers once with the current time, which
// starts their clocks.
func New(p *policy.Policy, req *validator.Request, opts Options) (*Attempt, error) {
	a := &Attempt{pol: p, now: clock.Or(opts.Clock).Now, complete: opts.Complete, notify: make(chan struct{}, 1), req: req}
	reg := opts.Registry
	if reg == nil {
		reg = p.Registry
	}
	if reg == nil {
		reg = validator.Default
	}
	fail := func(err error) (*Attempt, error) {
		a.Stop()
		return nil, err
	}
	// Guards read from the request what the policy does with text they
	// could not judge: the rule for guard_unavailable decides, nothing else.
	req.Unjudged = p.Rule(validator.ReasonGuardUnavailable).Action
	for _, c := range p.Checks {
		v, err := c.Spec.New(c.Config, req)
		if err != nil {
			return fail(fmt.Errorf("pipeline: check %s: %w", c.Name, err))
		}
		a.add(v, c.Spec.AnswerOnly)
		if c.Spec.Arguments != nil {
			a.argReaders = append(a.argReaders, argReader{c: c})
		}
	}
	jsonOut := req.WantsJSON()
	if p.Constraints {
		for _, c := range constraints.Compiled(req) {
			spec, ok := reg.Lookup(c.Name)
			if !ok {
				continue // the check is not built into this binary
			}
			cfg, err := constraintConfig(spec, c)
			if err != nil {
				return fail(fmt.Errorf("pipeline: constraint %q: %w", c.Source, err))
			}
			v, err := spec.New(cfg, req)
			if err != nil {
				return fail(fmt.Errorf("pipeline: constraint %q: %w", c.Source, err))
			}
			a.add(v, spec.AnswerOnly)
			if c.Name == "json_syntax" && v != nil {
				jsonOut = true
			}
		}
	}
	a.mode = p.Release.Resolve(jsonOut)
	if a.mode == policy.ModeWatermark {
		a.maxHold = p.MaxHold
	}
	if len(a.tickers) > 0 {
		a.tick(a.now(), true)
	}
	for _, v := range a.vs {
		if w, ok := v.(*answerOnly); ok {
			v = w.Validator
		}
		if s, ok := v.(validator.Starter); ok {
			s.Start()
		}
	}
	return a, nil
}

func (a *Attempt) add(v validator.Validator, answerOnlyCheck bool) {
	if v == nil {
		return
	}
	if _, bg := v.(validator.Background); answerOnlyCheck && !bg {
		a.vs = append(a.vs, &answerOnly{Validator: v})
	} else {
		a.vs = append(a.vs, v)
	}
	_, bg := v.(validator.Background)
	a.bg = append(a.bg, bg)
	if t, ok := v.(validator.Ticker); ok {
		a.tickers = append(a.tickers, t)
	}
	if w, ok := v.(validator.ProgressWatcher); ok {
		a.watchers = append(a.watchers, w)
	}
	if t, ok := v.(validator.ToolCallChecker); ok {
		a.toolChks = append(a.toolChks, t)
	}
	if b, ok := v.(validator.Background); ok {
		a.bgs = append(a.bgs, b)
		b.Notify(func() {
			select {
			case a.notify <- struct{}{}:
			default:
			}
		})
	}
}

// configCache holds decoded constraint configurations by check and
// configuration, since the same instructions recur across requests. Decoded
// configurations are read-only, so sharing is safe.
var configCache sync.Map // string -> any

const configCacheMax = 4096

var configCacheLen int64
var configCacheMu sync.Mutex

func constraintConfig(spec validator.Spec, c constraints.Check) (any, error) {
	if spec.Config == nil {
		return nil, nil
	}
	key := c.Name + "\x00" + fmt.Sprint(c.Config)
	if v, ok := configCache.Load(key); ok {
		return v, nil
	}
	cfg := spec.Config()
	var n yaml.Node
	if err := n.Encode(c.Config); err != nil {
		return nil, err
	}
	if err := policy.DecodeStrict(&n, cfg); err != nil {
		return nil, fmt.Errorf("config for %s: %w", c.Name, err)
	}
	configCacheMu.Lock()
	if configCacheLen < configCacheMax {
		configCacheLen++
		configCache.Store(key, cfg)
	}
	configCacheMu.Unlock()
	return cfg, nil
}

// Feed gives the checks the next piece of output, which arrived at at.
func (a *Attempt) Feed(p []byte, at time.Time) Step {
	if a.closed {
		return a.step(at)
	}
	if len(a.tickers) > 0 && !at.Equal(a.ticked) {
		// The time up to the arrival, before the text; a chunk that
		// arrived with the one before it brings no new time.
		a.tick(at, true)
	}
	a.fed += len(p)
	if a.maxHold > 0 && len(p) > 0 {
		a.arrivals = append(a.arrivals, arrival{end: a.fed, at: at})
	}
	if !a.failed || a.complete {
		for _, v := range a.vs {
			if w, ok := v.(*answerOnly); ok && a.feeding {
				w.skipReasoning(len(p))
				continue
			}
			v.Write(p)
		}
	}
	if len(a.tickers) > 0 {
		a.tick(at, false) // the text arrived at at; step looks for failures
	}
	return a.step(at)
}

// Carry says the next n bytes fed (text or reasoning) were released by an
// earlier attempt and are fed again so that the checks read the whole
// answer: the checks that judge the upstream's timing (validator.Carrier)
// do not take them for output of this attempt's upstream.
func (a *Attempt) Carry(n int) {
	for _, v := range a.vs {
		if c, ok := v.(validator.Carrier); ok {
			c.Carry(n)
		}
	}
}

// Write feeds p as arriving now on the attempt's clock.
func (a *Attempt) Write(p []byte) { a.Feed(p, a.now()) }

// ToolCall checks one completed tool call.
func (a *Attempt) ToolCall(c validator.ToolCall) {
	if a.failed && !a.complete {
		return
	}
	from := len(a.toolFinds)
	if c.Read == nil || c.Read.Arguments != c.Arguments {
		c.Read = toolcalls.Read(c.Arguments) // once, for every check
	}
	for _, t := range a.toolChks {
		a.toolFinds = append(a.toolFinds, t.CheckToolCall(c)...)
	}
	a.toolFinds = append(a.toolFinds, a.readArguments(c)...)
	// What a check says about a call goes into error messages, incidents,
	// events and logs: none of the call's bytes may go with it.
	if from < len(a.toolFinds) && c.Arguments != "" {
		s := toolcalls.NewScrubber(c.Arguments, c.Read)
		for i := from; i < len(a.toolFinds); i++ {
			a.toolFinds[i].Message = s.Scrub(a.toolFinds[i].Message)
		}
	}
	if !a.failed {
		a.checkFailed()
	}
}

// Tick tells the checks the time (the stall check's deadlines, a
// background judgement's deadline, max_hold) and takes in what background
// checks reported since the last step.
func (a *Attempt) Tick(now time.Time) Step {
	if a.state != Done {
		a.tick(now, false)
	}
	return a.step(now)
}

// tick tells the tickers the time; check looks for a failure after, for a
// caller that must know before it goes on (step looks anyway).
func (a *Attempt) tick(now time.Time, check bool) {
	if a.failed && !a.complete {
		return
	}
	a.ticked = now
	for _, t := range a.tickers {
		t.Tick(now)
	}
	if check && !a.failed {
		a.checkFailed()
	}
}

// Fail ends the attempt with a finding its caller made (the gateway: the
// upstream went silent or broke). The policy judges it like any other
// finding, so the verdict has one source.
func (a *Attempt) Fail(f validator.Finding, now time.Time) Step {
	a.own = append(a.own, f)
	if !a.failed {
		a.checkFailed()
	}
	a.closed = true
	a.state = Done
	return a.step(now)
}

// Close marks the end of the output at the attempt's clock's now.
func (a *Attempt) Close() Step { return a.CloseAt(a.now()) }

// CloseAt marks the end of the output at now and runs the end-of-output
// checks. The attempt is then closing until every background check has
// answered (or given up at its deadline), done after. It is idempotent.
func (a *Attempt) CloseAt(now time.Time) Step {
	if a.closed {
		return a.step(now)
	}
	if len(a.tickers) > 0 {
		a.tick(now, true)
	}
	a.closed = true
	if !a.failed || a.complete {
		for _, v := range a.vs {
			v.Close()
		}
	}
	if !a.failed {
		a.checkFailed()
	}
	return a.step(now)
}

// step applies max_hold, takes in background findings and says what the
// caller may do now.
func (a *Attempt) step(now time.Time) Step {
	bgDone := true
	for _, b := range a.bgs {
		if !b.Done() {
			bgDone = false
		}
	}
	if a.state != Done {
		// Done is read before the findings: a background check records
		// its findings before it reports done.
		a.hold(now)
		if !a.failed {
			a.checkFailed()
		}
		switch {
		case a.failed && !a.complete:
			a.state = Done
		case a.closed && bgDone:
			a.state = Done
		case a.closed:
			a.state = Closing
		}
	}
	if rp := a.ReleasePoint(); rp > a.released {
		a.released = rp
	}
	return Step{Release: a.released, State: a.state, Failed: a.failed, Wake: a.NextDeadline()}
}

// hold applies max_hold in watermark mode: text that only background
// checks still hold, older than max_hold, is released unjudged with a
// guard_unavailable finding for the policy to judge.
func (a *Attempt) hold(now time.Time) {
	o, sync, who := a.heldByBackground()
	if o >= sync {
		return
	}
	limit := o
	for _, ar := range a.arrivals {
		if ar.end <= o {
			continue
		}
		if now.Sub(ar.at) < a.maxHold {
			break
		}
		limit = ar.end
	}
	limit = min(limit, sync)
	if limit <= o {
		return
	}
	a.held = limit
	if a.heldNote == 0 {
		a.own = append(a.own, validator.Finding{Check: who, Reason: validator.ReasonGuardUnavailable, Start: o, End: limit,
			Message: fmt.Sprintf("no verdict on this text within max_hold %s", a.maxHold)})
		a.heldNote = len(a.own)
	} else {
		a.own[a.heldNote-1].End = limit
	}
}

// heldByBackground returns the offset from which only background checks
// hold the output, the offset every other check has cleared, and the
// name of the background check that holds it. o >= sync when there is
// nothing for max_hold to release.
func (a *Attempt) heldByBackground() (o, sync int, who string) {
	if a.maxHold <= 0 || len(a.bgs) == 0 || a.failed {
		return 0, 0, ""
	}
	k := 0
	for k < len(a.arrivals) && a.arrivals[k].end <= a.released {
		k++
	}
	a.arrivals = a.arrivals[k:]
	sync = a.fed
	bg := a.fed
	for i, v := range a.vs {
		n := v.Settled()
		if a.bg[i] {
			if n < bg {
				bg, who = n, v.Name()
			}
			continue
		}
		sync = min(sync, n)
	}
	return max(a.released, a.held, bg), sync, who
}

// holdWake is when max_hold next releases text, or zero.
func (a *Attempt) holdWake() time.Time {
	o, sync, _ := a.heldByBackground()
	if o >= sync {
		return time.Time{}
	}
	for _, ar := range a.arrivals {
		if ar.end > o {
			return ar.at.Add(a.maxHold)
		}
	}
	return time.Time{}
}

// NextDeadline returns the earliest time the attempt needs a Tick, or the
// zero time when none.
func (a *Attempt) NextDeadline() time.Time {
	var d time.Time
	if a.state == Done || a.failed && !a.complete {
		return d
	}
	consider := func(n time.Time) {
		if !n.IsZero() && (d.IsZero() || n.Before(d)) {
			d = n
		}
	}
	for _, t := range a.tickers {
		consider(t.NextDeadline())
	}
	consider(a.holdWake())
	return d
}

// Notify returns a channel that receives when a background check has
// reported something: the caller then calls Tick.
func (a *Attempt) Notify() <-chan struct{} { return a.notify }

// Stop abandons the background judgements in flight and waits for their
// goroutines. Call it once the attempt's outcome no longer matters.
func (a *Attempt) Stop() {
	for _, b := range a.bgs {
		b.Stop()
	}
}

// failing reports whether f is a failure under the policy (not a note and
// not a reason the policy releases).
func (a *Attempt) failing(f *validator.Finding) bool {
	return f.Reason != validator.ReasonNone && a.pol.Rule(f.Reason).Action != validator.ActionRelease
}

// checkFailed looks for a new failure and freezes the release point at
// it (never before what was already released).
func (a *Attempt) checkFailed() {
	first := -1
	for i := range a.toolFinds {
		if a.failing(&a.toolFinds[i]) {
			first = a.fed
			break
		}
	}
	look := func(fs []validator.Finding) {
		for i := range fs {
			if a.failing(&fs[i]) && (first < 0 || fs[i].Start < first) {
				first = fs[i].Start
			}
		}
	}
	look(a.own)
	for _, v := range a.vs {
		look(v.Findings())
	}
	if first < 0 {
		return
	}
	a.failed = true
	switch a.mode {
	case policy.ModeBuffer:
		a.frozen = 0
	case policy.ModeOptimistic:
		a.frozen = a.released
	default:
		a.frozen = min(a.settled(), first)
	}
	a.frozen = max(a.released, 0, min(a.frozen, a.fed))
}

func (a *Attempt) settled() int {
	s := a.fed
	for i, v := range a.vs {
		n := v.Settled()
		if a.bg[i] {
			n = max(n, a.held)
		}
		s = min(s, n)
	}
	return s
}

// ReleasePoint returns the offset up to which the output may be given to
// the client now.
func (a *Attempt) ReleasePoint() int {
	if a.failed {
		return a.frozen
	}
	switch {
	case a.state == Done:
		return a.fed
	case a.mode == policy.ModeOptimistic:
		return a.fed
	case a.mode == policy.ModeBuffer:
		return 0
	}
	return max(0, a.settled())
}

// Failed reports whether a check has failed the output.
func (a *Attempt) Failed() bool { return a.failed }

// State returns where the attempt is in its life.
func (a *Attempt) State() State { return a.state }

// Findings returns every finding so far, ordered by Start (stable in check
// order), tool-call findings last.
func (a *Attempt) Findings() []validator.Finding {
	out := append([]validator.Finding(nil), a.own...)
	for _, v := range a.vs {
		out = append(out, v.Findings()...)
	}
	a.locateReasoning(out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	out = append(out, a.toolFinds...)
	return out
}

// Verdict decides the attempt's verdict under the policy; attempt is the
// 1-based attempt number (see policy.Decide).
func (a *Attempt) Verdict(attempt int) validator.Verdict {
	return a.pol.Decide(a.Findings(), attempt)
}

// Len returns how many bytes of output were fed.
func (a *Attempt) Len() int { return a.fed }

// Mode returns the resolved release mode (never ModeAuto).
func (a *Attempt) Mode() policy.Mode { return a.mode }

// Checks returns the names of the attempt's checks, in feeding order.
func (a *Attempt) Checks() []string {
	out := make([]string, len(a.vs))
	for i, v := range a.vs {
		out[i] = v.Name()
	}
	return out
}
