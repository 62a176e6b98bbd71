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

	"github.com/aegis-sentinel/aegis/internal/constraints"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Options refine an Attempt. The zero value is ready to use.
type Options struct {
	// Now is the clock for Tickers; nil means time.Now.
	Now func() time.Time
	// Registry resolves the checks compiled from the prompt; nil means the
	// policy's registry (validator.Default for the default policy).
	Registry *validator.Registry
	// Extra are validators added to the policy's checks (the guard).
	Extra []validator.Validator
	// Complete keeps feeding every check after a failure, so Findings
	// holds everything the output breaks (aegis check). The release point
	// still freezes at the first failure.
	Complete bool
}

// Attempt is the checking state of one attempt at generating a response.
type Attempt struct {
	pol      *policy.Policy
	now      func() time.Time
	mode     policy.Mode
	complete bool

	vs       []validator.Validator
	tickers  []validator.Ticker
	toolChks []validator.ToolCallChecker

	text      []byte
	toolFinds []validator.Finding
	failed    bool
	closed    bool
	frozen    int
}

// New builds the attempt's checks: the policy's enabled checks that apply
// to req, the checks compiled from the prompt (when the policy allows), and
// opts.Extra. It ticks Tickers once with the current time, which starts
// their clocks.
func New(p *policy.Policy, req *validator.Request, opts Options) (*Attempt, error) {
	a := &Attempt{pol: p, now: opts.Now, complete: opts.Complete}
	if a.now == nil {
		a.now = time.Now
	}
	reg := opts.Registry
	if reg == nil {
		reg = p.Registry
	}
	if reg == nil {
		reg = validator.Default
	}
	for _, c := range p.Checks {
		v, err := c.Spec.New(c.Config, req)
		if err != nil {
			return nil, fmt.Errorf("pipeline: check %s: %w", c.Name, err)
		}
		a.add(v)
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
				return nil, fmt.Errorf("pipeline: constraint %q: %w", c.Source, err)
			}
			v, err := spec.New(cfg, req)
			if err != nil {
				return nil, fmt.Errorf("pipeline: constraint %q: %w", c.Source, err)
			}
			a.add(v)
			if c.Name == "json_syntax" && v != nil {
				jsonOut = true
			}
		}
	}
	for _, v := range opts.Extra {
		a.add(v)
	}
	a.mode = p.Release.Resolve(jsonOut)
	if len(a.tickers) > 0 {
		a.tick(a.now())
	}
	return a, nil
}

func (a *Attempt) add(v validator.Validator) {
	if v == nil {
		return
	}
	a.vs = append(a.vs, v)
	if t, ok := v.(validator.Ticker); ok {
		a.tickers = append(a.tickers, t)
	}
	if t, ok := v.(validator.ToolCallChecker); ok {
		a.toolChks = append(a.toolChks, t)
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

// Write feeds the next piece of output text.
func (a *Attempt) Write(p []byte) {
	if a.closed {
		return
	}
	if len(a.tickers) > 0 {
		a.tick(a.now())
	}
	before := len(a.text)
	a.text = append(a.text, p...)
	if a.failed && !a.complete {
		return
	}
	for _, v := range a.vs {
		v.Write(p)
	}
	if !a.failed {
		a.checkFailed(before)
	}
}

// ToolCall checks one completed tool call.
func (a *Attempt) ToolCall(c validator.ToolCall) {
	if a.failed && !a.complete {
		return
	}
	for _, t := range a.toolChks {
		a.toolFinds = append(a.toolFinds, t.CheckToolCall(c)...)
	}
	if !a.failed {
		a.checkFailed(len(a.text))
	}
}

// Tick forwards the time to the checks that judge time (the stall
// watchdog).
func (a *Attempt) Tick(now time.Time) {
	if a.closed {
		return
	}
	a.tick(now)
}

func (a *Attempt) tick(now time.Time) {
	if a.failed && !a.complete {
		return
	}
	for _, t := range a.tickers {
		t.Tick(now)
	}
	if !a.failed {
		a.checkFailed(len(a.text))
	}
}

// NextDeadline returns the earliest time a Ticker wants a Tick, or the zero
// time when none does.
func (a *Attempt) NextDeadline() time.Time {
	var d time.Time
	if a.closed || a.failed {
		return d
	}
	for _, t := range a.tickers {
		if n := t.NextDeadline(); !n.IsZero() && (d.IsZero() || n.Before(d)) {
			d = n
		}
	}
	return d
}

// failing reports whether f is a failure under the policy (not a note and
// not a reason the policy releases).
func (a *Attempt) failing(f *validator.Finding) bool {
	return f.Reason != validator.ReasonNone && a.pol.Rule(f.Reason).Action != validator.ActionRelease
}

// checkFailed looks for a new failure; released is the length of the text
// already given out before the latest piece (optimistic mode).
func (a *Attempt) checkFailed(released int) {
	first := -1
	for i := range a.toolFinds {
		if a.failing(&a.toolFinds[i]) {
			first = len(a.text)
			break
		}
	}
	for _, v := range a.vs {
		fs := v.Findings()
		for i := range fs {
			if a.failing(&fs[i]) && (first < 0 || fs[i].Start < first) {
				first = fs[i].Start
			}
		}
	}
	if first < 0 {
		return
	}
	a.failed = true
	switch a.mode {
	case policy.ModeBuffer:
		a.frozen = 0
	case policy.ModeOptimistic:
		a.frozen = released
	default:
		a.frozen = min(a.settled(), first)
	}
	a.frozen = max(0, min(a.frozen, len(a.text)))
}

func (a *Attempt) settled() int {
	s := len(a.text)
	for _, v := range a.vs {
		if n := v.Settled(); n < s {
			s = n
		}
	}
	return s
}

// ReleasePoint returns the offset up to which the output may be given to
// the client now.
func (a *Attempt) ReleasePoint() int {
	if a.failed {
		return a.frozen
	}
	switch a.mode {
	case policy.ModeOptimistic:
		return len(a.text)
	case policy.ModeBuffer:
		if a.closed {
			return len(a.text)
		}
		return 0
	}
	return max(0, a.settled())
}

// Failed reports whether a check has failed the output.
func (a *Attempt) Failed() bool { return a.failed }

// Findings returns every finding so far, ordered by Start (stable in check
// order), tool-call findings last.
func (a *Attempt) Findings() []validator.Finding {
	var out []validator.Finding
	for _, v := range a.vs {
		out = append(out, v.Findings()...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	out = append(out, a.toolFinds...)
	return out
}

// Close marks the end of the output and runs the end-of-output checks. It
// is idempotent.
func (a *Attempt) Close() {
	if a.closed {
		return
	}
	if len(a.tickers) > 0 {
		a.tick(a.now())
	}
	a.closed = true
	if a.failed && !a.complete {
		return
	}
	for _, v := range a.vs {
		v.Close()
	}
	if !a.failed {
		a.checkFailed(len(a.text))
	}
}

// Verdict decides the attempt's verdict under the policy; attempt is the
// 1-based attempt number (see policy.Decide).
func (a *Attempt) Verdict(attempt int) validator.Verdict {
	return a.pol.Decide(a.Findings(), attempt)
}

// Text returns the output so far. The slice is the attempt's own; do not
// modify it.
func (a *Attempt) Text() []byte { return a.text }

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
