// Package guard judges text for prompt injection and unsafe content. The
// default guard is the embedded classifier (package classifier): it needs
// no server and answers in well under a millisecond. It serves the
// gateway as an input check (CheckInput, before generation) and the
// pipeline as the "guard" output validator, which scores the streamed
// output at sentence boundaries and holds back only the unscored tail.
//
// The guard LLM over a local API (llama-server or Ollama) lives in the
// sub-package llm.
package guard

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Guard is the embedded-classifier guard. The zero value is not usable;
// build one with New or Default. It is safe for concurrent use.
type Guard struct {
	model *classifier.Model
	// scoresKey names, in a request's memo, the tool-result scores of
	// the model: guards over one model share them (ScoreToolResultOf).
	scoresKey string
	// Roles are the message roles CheckInput scores. Nil means user and
	// tool messages (text the application did not write itself).
	Roles []string
}

// New returns a guard over model.
func New(model *classifier.Model) (*Guard, error) {
	if model == nil {
		return nil, fmt.Errorf("guard: nil model")
	}
	for _, h := range []string{classifier.HeadInjection, classifier.HeadUnsafe} {
		if _, ok := model.Head(h); !ok {
			return nil, fmt.Errorf("guard: model has no %s head", h)
		}
	}
	return &Guard{model: model, scoresKey: fmt.Sprintf("guard.tool-result-scores.%p", model)}, nil
}

// Default returns a guard over the embedded model.
func Default() (*Guard, error) {
	m, err := classifier.Default()
	if err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	return New(m)
}

// Load returns a guard over the model in file, as aegis train writes it.
func Load(file string) (*Guard, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	m := new(classifier.Model)
	if err := m.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("guard: %s: %w", file, err)
	}
	return New(m)
}

// Model returns the classifier the guard uses.
func (g *Guard) Model() *classifier.Model { return g.model }

func (g *Guard) scoresRole(role string) bool {
	if g.Roles == nil {
		return role == "user" || role == "tool" || role == "function"
	}
	for _, r := range g.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// riskOf maps a head's score to a risk tier.
func riskOf(s classifier.Score) validator.Risk {
	switch {
	case s.HighRisk:
		return validator.RiskHigh
	case s.Flag:
		return validator.RiskMedium
	}
	return validator.RiskLow
}

// CheckInput scores the user and tool messages of req before generation.
// It returns nil when nothing is flagged, and a fail verdict with action
// block when a message scores above the prompt_injection threshold. It
// matches the gateway hook InputCheck. Unsafe-content scores on input are
// reported as findings of a passing verdict only when the injection head
// also flags; on their own they are left to the output checks (a harmful
// question is not an attack on the model).
func (g *Guard) CheckInput(ctx context.Context, req *validator.Request) *validator.Verdict {
	if req == nil {
		return nil
	}
	var worst *validator.Verdict
	for i, m := range req.Messages {
		if ctx.Err() != nil {
			return nil
		}
		if !g.scoresRole(m.Role) || strings.TrimSpace(m.Content) == "" {
			continue
		}
		s := g.score(m.Content, classifier.HeadInjection)
		if !s.Flag {
			continue
		}
		risk := riskOf(s)
		if worst != nil && risk <= worst.Risk {
			continue
		}
		worst = &validator.Verdict{
			Verdict: validator.Fail, Risk: risk, Reason: validator.ReasonPromptInjection, Action: validator.ActionBlock,
			Findings: []validator.Finding{{
				Check: "guard", Reason: validator.ReasonPromptInjection, Start: 0, End: len(m.Content),
				Message: fmt.Sprintf("message %d (%s) looks like prompt injection (p=%.2f)", i, m.Role, s.Prob),
				Path:    fmt.Sprintf("messages/%d", i),
			}},
		}
	}
	return worst
}

func (g *Guard) score(text, head string) classifier.Score {
	for _, s := range g.model.Scores(text) {
		if s.Head == head {
			return s
		}
	}
	return classifier.Score{Head: head, Raw: float32(math.Inf(-1))}
}

// Score implements eval.Scorer: the score is the raw logit minus the
// head's threshold (so 0 is the decision boundary); head "any" takes the
// largest margin over the heads.
func (g *Guard) Score(_ context.Context, text, head string) (float64, bool, error) {
	best, flag, found := math.Inf(-1), false, false
	for _, s := range g.model.Scores(text) {
		if head != classifier.HeadAny && s.Head != head {
			continue
		}
		h, _ := g.model.Head(s.Head)
		found = true
		best = math.Max(best, float64(s.Raw-h.Threshold))
		flag = flag || s.Flag
	}
	if !found {
		return 0, false, fmt.Errorf("guard: model has no head %q", head)
	}
	return best, flag, nil
}
