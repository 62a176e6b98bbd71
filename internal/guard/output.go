package guard

import (
	"fmt"
	"time"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// OutputConfig configures the "guard" output validator.
type OutputConfig struct {
	// Heads are the reasons judged on the output (default both).
	Heads []string `json:"heads" yaml:"heads"`
	// Threshold, when above 0, overrides the heads' own thresholds with a
	// calibrated probability (0..1) at and above which output is flagged.
	Threshold float64 `json:"threshold" yaml:"threshold"`
	// CadenceTokens scores the output at least every this many tokens
	// (counted as 4 bytes each) when no sentence ends; 0 means 32.
	CadenceTokens int `json:"cadence_tokens" yaml:"cadence_tokens"`
	// WindowBytes is how much output, ending at the scoring point, is
	// scored each time (default 2048).
	WindowBytes int `json:"window_bytes" yaml:"window_bytes"`
	// FailOpen, when set, is a shorthand for the policy's rule for
	// guard_unavailable (true: release, false: halt), which alone decides
	// what happens to text the guard could not judge (its model did not
	// load): it is reported with a guard_unavailable finding either way.
	FailOpen *bool `json:"fail_open" yaml:"fail_open"`
	// Deadline is accepted for symmetry with guard_llm; the embedded
	// classifier answers synchronously inside Write, far below any
	// deadline, so it is not used.
	Deadline time.Duration `json:"deadline" yaml:"deadline"`
}

// Register adds the check to r.
func Register(r *validator.Registry) {
	s := validator.Spec{
		Name:    "guard",
		Summary: "embedded classifier for unsafe content and prompt injection in the output",
		Doc: `Scores the streamed output with the embedded n-gram classifier at every sentence end
(., !, ? or a newline followed by whitespace) and at least every cadence_tokens tokens, over the
last window_bytes of output. Text after the last scoring point is held back (Settled lags to
it); scoring takes well under a millisecond, so the hold-back is one sentence. A score at or
above the head's threshold (set at training time on held-out data, or the calibrated
probability in threshold) fails the output with unsafe_content or prompt_injection; the
prompt_injection head judges output at its high-risk level, as the input screen does by default.
The verdict's risk is the policy's for the reason.`,
		Reasons: []validator.Reason{validator.ReasonUnsafeContent, validator.ReasonPromptInjection, validator.ReasonGuardUnavailable},
		Example: "heads: [unsafe_content, prompt_injection]\ncadence_tokens: 32\nfail_open: false\n",
		Config:  func() any { return &OutputConfig{} },
		New: func(cfg any, req *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*OutputConfig)
			if c == nil {
				c = &OutputConfig{}
			}
			g, err := Default()
			if err != nil {
				return validator.Unavailable("guard", err.Error(), req), nil
			}
			return g.NewOutput(*c)
		},
	}
	// A tool call's argument values are text the model wrote, read the
	// same way.
	s.Arguments = s.New
	r.Register(s)
}

// NewOutput returns an output validator over g's model.
func (g *Guard) NewOutput(c OutputConfig) (validator.Validator, error) {
	if len(c.Heads) == 0 {
		c.Heads = []string{classifier.HeadUnsafe, classifier.HeadInjection}
	}
	for _, h := range c.Heads {
		if _, ok := g.model.Head(h); !ok {
			return nil, fmt.Errorf("guard: unknown head %q", h)
		}
	}
	if c.Threshold < 0 || c.Threshold >= 1 {
		return nil, fmt.Errorf("guard: threshold %v outside [0, 1)", c.Threshold)
	}
	if c.CadenceTokens <= 0 {
		c.CadenceTokens = 32
	}
	if c.WindowBytes <= 0 {
		c.WindowBytes = 2048
	}
	return &output{g: g, cfg: c}, nil
}

// output is the "guard" validator for one attempt.
type output struct {
	g        *Guard
	cfg      OutputConfig
	buf      []byte
	scanned  int // bytes examined for boundaries
	settled  int // last scoring point
	findings []validator.Finding
	closed   bool
}

func (o *output) Name() string { return "guard" }

func (o *output) Write(p []byte) (int, error) {
	if o.closed || len(o.findings) > 0 {
		o.buf = append(o.buf, p...)
		return len(p), nil
	}
	o.buf = append(o.buf, p...)
	cadence := 4 * o.cfg.CadenceTokens
	// A boundary at i+1 needs the byte after the sentence end, so scan
	// only up to len-1; the result does not depend on how text was split.
	for ; o.scanned+1 < len(o.buf) && len(o.findings) == 0; o.scanned++ {
		c, next := o.buf[o.scanned], o.buf[o.scanned+1]
		end := (c == '.' || c == '!' || c == '?' || c == '\n') && (next == ' ' || next == '\n' || next == '\t' || next == '\r')
		if end || o.scanned+1-o.settled >= cadence {
			o.scoreTo(o.scanned + 1)
		}
	}
	return len(p), nil
}

// scoreTo scores the window ending at b and moves the settled point.
func (o *output) scoreTo(b int) {
	start := max(0, b-o.cfg.WindowBytes)
	scores := o.g.model.Scores(string(o.buf[start:b]))
	for _, h := range o.cfg.Heads {
		for _, s := range scores {
			if s.Head != h {
				continue
			}
			flag := s.Flag
			if h == classifier.HeadInjection {
				// On the output the injection head flags only at its
				// high-risk level (the input screen's default): its lower
				// threshold flags ordinary sentences.
				flag = s.HighRisk
			}
			if o.cfg.Threshold > 0 {
				flag = float64(s.Prob) >= o.cfg.Threshold
			}
			if flag {
				o.findings = append(o.findings, validator.Finding{
					Check: "guard", Reason: validator.Reason(h), Start: o.settled, End: b,
					Message: fmt.Sprintf("classifier scores the output as %s (p=%.2f)", h, s.Prob),
				})
				return
			}
		}
	}
	o.settled = b
}

func (o *output) Settled() int { return o.settled }

func (o *output) Findings() []validator.Finding { return o.findings }

func (o *output) Close() {
	if o.closed {
		return
	}
	o.closed = true
	if len(o.findings) == 0 && o.settled < len(o.buf) {
		o.scanned = len(o.buf)
		o.scoreTo(len(o.buf))
	}
}
