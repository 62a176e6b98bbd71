// Package stall is the stall watchdog: it fails an attempt whose stream
// goes quiet, with deadlines for the time to the first token, the gap
// between chunks and the total time of the attempt.
//
// The watchdog judges time, not text. It implements validator.Ticker: the
// pipeline calls Tick with the current time when a chunk arrives and on a
// timer at NextDeadline while it waits, so a deadline fires even when no
// text comes. The watchdog never reads a clock itself, which keeps it
// deterministic under test (a fake clock is just a sequence of Ticks).
//
// Timing model: the attempt starts at the first Tick (or at Options.Start).
// Text written since the previous Tick counts as having arrived at the next
// Tick, so a pipeline that calls Tick just before or just after Write with
// the arrival time gets the same answer. A deadline has passed when
// now >= deadline. The watchdog never holds text back: Settled is always
// the number of bytes written.
package stall

import (
	"fmt"
	"time"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Name is the registry name of the check.
const Name = "stall"

// Duration is a time.Duration that reads and writes as a Go duration
// string ("30s", "1m30s") in YAML and JSON policies. A bare integer is
// not accepted: its unit would be a guess.
type Duration time.Duration

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("stall: duration %q: %w", b, err)
	}
	if v < 0 {
		return fmt.Errorf("stall: duration %q is negative", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText formats the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// String returns the duration as a Go duration string.
func (d Duration) String() string { return time.Duration(d).String() }

// Config is the policy section of the check. A zero duration turns that
// deadline off.
type Config struct {
	// TTFT is the longest wait for the first byte of output (text,
	// reasoning or a tool call), counted from the start or from the
	// upstream's last sign of work on the prompt, whichever is later.
	TTFT Duration `yaml:"ttft" json:"ttft"`
	// Gap is the longest wait between two pieces of output once output
	// has begun (text, reasoning and tool-call pieces all count).
	Gap Duration `yaml:"gap" json:"gap"`
	// Total is the longest the whole attempt may take (0 = no limit).
	Total Duration `yaml:"total" json:"total"`
}

// DefaultConfig returns the defaults: 30s to the first token, 15s between
// chunks, no total limit.
func DefaultConfig() *Config {
	return &Config{TTFT: Duration(30 * time.Second), Gap: Duration(15 * time.Second)}
}

// Register adds the check to r.
func Register(r *validator.Registry) {
	r.Register(validator.Spec{
		Name:    Name,
		Summary: "fails a stream that stalls: time to first token, gap between chunks, total time",
		Doc: `Deadlines driven by the pipeline's clock (validator.Ticker): ttft is the longest
wait for the first output byte, gap the longest silence between chunks once
output has begun, total the longest the attempt may take. 0 turns a deadline
off. Durations are Go duration strings ("30s", "2m"). The attempt starts at
the first tick. The check never holds text back.`,
		Reasons: []validator.Reason{validator.ReasonStall},
		Example: "ttft: 30s\ngap: 15s\ntotal: 5m\n",
		Config:  func() any { return DefaultConfig() },
		New: func(cfg any, _ *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*Config)
			if c == nil {
				c = DefaultConfig()
			}
			return New(*c, Options{}), nil
		},
	})
}

// Options are construction-time settings that do not come from a policy.
type Options struct {
	// Start is when the attempt began. The zero value means "at the
	// first Tick".
	Start time.Time
}

// Watchdog is the stall validator. Create it with New.
type Watchdog struct {
	cfg Config

	started      bool
	start        time.Time
	lastActivity time.Time // time of the last Tick that saw new text
	lastWork     time.Time // the upstream's last sign of work before output
	sawOutput    bool      // some text has arrived (and been ticked)
	pending      bool      // text written since the last Tick
	carry        int       // bytes still to be written that an earlier attempt sent
	written      int
	closed       bool
	findings     []validator.Finding
}

var (
	_ validator.Validator       = (*Watchdog)(nil)
	_ validator.Ticker          = (*Watchdog)(nil)
	_ validator.ProgressWatcher = (*Watchdog)(nil)
	_ validator.Carrier         = (*Watchdog)(nil)
)

// Carry says the next n bytes written were sent by an earlier attempt
// (a retry's checks read the released text again): they are no sign of
// life from the upstream, so the attempt still waits for its first token.
func (w *Watchdog) Carry(n int) {
	if n > 0 {
		w.carry += n
	}
}

// Progress records the upstream's progress at at: a piece of output
// (output) restarts the gap as text does and ends the wait for a first
// token; any other event restarts the gap once output has begun, and
// before it the wait for a first token.
func (w *Watchdog) Progress(at time.Time, output bool) {
	if w.closed || len(w.findings) > 0 {
		return
	}
	if !w.started {
		w.started, w.start = true, at
	}
	if output || w.sawOutput {
		w.sawOutput = true
		if at.After(w.lastActivity) {
			w.lastActivity = at
		}
		return
	}
	if at.After(w.lastWork) {
		w.lastWork = at
	}
}

// ttftFrom is when the wait for the first token runs from.
func (w *Watchdog) ttftFrom() time.Time {
	if w.lastWork.After(w.start) {
		return w.lastWork
	}
	return w.start
}

// New returns a watchdog with the given deadlines.
func New(cfg Config, opt Options) *Watchdog {
	w := &Watchdog{cfg: cfg}
	if !opt.Start.IsZero() {
		w.started, w.start = true, opt.Start
	}
	return w
}

// Name returns "stall".
func (w *Watchdog) Name() string { return Name }

// Write records that text arrived; its time is that of the next Tick.
func (w *Watchdog) Write(p []byte) (int, error) {
	w.written += len(p)
	n := len(p)
	if w.carry > 0 {
		c := min(w.carry, n)
		w.carry -= c
		n -= c
	}
	if n > 0 {
		w.pending = true
	}
	return len(p), nil
}

// Settled is everything written: a stall is about time, not text.
func (w *Watchdog) Settled() int { return w.written }

// Findings returns the stall, if one happened.
func (w *Watchdog) Findings() []validator.Finding { return w.findings }

// Close ends the attempt; no deadline fires after it.
func (w *Watchdog) Close() { w.closed = true }

// Tick tells the watchdog the time now and fires any deadline that has
// passed. At most one finding is ever reported: a stalled attempt is over.
func (w *Watchdog) Tick(now time.Time) {
	if w.closed || len(w.findings) > 0 {
		return
	}
	if !w.started {
		w.started, w.start = true, now
	}
	if w.pending {
		w.pending = false
		w.sawOutput = true
		w.lastActivity = now
	}
	kind, limit, since := w.expired(now)
	if kind == "" {
		return
	}
	w.findings = append(w.findings, validator.Finding{
		Check:   Name,
		Reason:  validator.ReasonStall,
		Start:   w.written,
		End:     w.written,
		Message: fmt.Sprintf("%s: %s without %s (limit %s)", kind, since.Round(time.Millisecond), what(kind), limit),
	})
}

func what(kind string) string {
	switch kind {
	case "ttft":
		return "a first token"
	case "gap":
		return "a new chunk"
	}
	return "finishing"
}

// expired returns the first deadline that has passed at now, if any, with
// its limit and the time elapsed against it. Total wins over the others
// when several pass at once, since it is the one a retry cannot fix by
// waiting.
func (w *Watchdog) expired(now time.Time) (kind string, limit Duration, since time.Duration) {
	if w.cfg.Total > 0 && !now.Before(w.start.Add(time.Duration(w.cfg.Total))) {
		return "total", w.cfg.Total, now.Sub(w.start)
	}
	if !w.sawOutput {
		if from := w.ttftFrom(); w.cfg.TTFT > 0 && !now.Before(from.Add(time.Duration(w.cfg.TTFT))) {
			return "ttft", w.cfg.TTFT, now.Sub(from)
		}
		return "", 0, 0
	}
	if w.cfg.Gap > 0 && !now.Before(w.lastActivity.Add(time.Duration(w.cfg.Gap))) {
		return "gap", w.cfg.Gap, now.Sub(w.lastActivity)
	}
	return "", 0, 0
}

// NextDeadline returns when the watchdog next needs a Tick: the earliest
// active deadline, or the zero time when none is pending (closed, already
// failed, not yet started, or every deadline off).
func (w *Watchdog) NextDeadline() time.Time {
	if w.closed || len(w.findings) > 0 || !w.started {
		return time.Time{}
	}
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if w.cfg.Total > 0 {
		consider(w.start.Add(time.Duration(w.cfg.Total)))
	}
	switch {
	case !w.sawOutput && w.cfg.TTFT > 0:
		consider(w.ttftFrom().Add(time.Duration(w.cfg.TTFT)))
	case w.sawOutput && w.cfg.Gap > 0:
		consider(w.lastActivity.Add(time.Duration(w.cfg.Gap)))
	}
	return next
}
