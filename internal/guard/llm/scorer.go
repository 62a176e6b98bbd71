package llm

import (
	"context"
	"fmt"
	"time"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Scorer adapts a Client to the evaluation harness (package eval): the
// score is P(fail) when the server reports probabilities, else 1 for a
// fail verdict and 0 for a pass.
type Scorer struct {
	Client  *Client
	Timeout time.Duration // per text; 0 means 60s
	// Protocol is the guard's protocol; auto (the zero value) asks the
	// server what model it runs. Native protocols judge each text as a
	// user's prompt.
	Protocol Protocol
}

// Score judges text for head ("prompt_injection", "unsafe_content" or
// "any", which asks the safety and the injection question and keeps the
// higher score).
func (s *Scorer) Score(ctx context.Context, text, head string) (float64, bool, error) {
	var tasks []Task
	switch head {
	case string(validator.ReasonPromptInjection):
		tasks = []Task{TaskInjection}
	case string(validator.ReasonUnsafeContent):
		tasks = []Task{TaskSafety}
	case "any":
		tasks = []Task{TaskSafety, TaskInjection}
	default:
		return 0, false, fmt.Errorf("guard llm: no task for head %q", head)
	}
	to := s.Timeout
	if to <= 0 {
		to = 60 * time.Second
	}
	p, err := resolveCached(ctx, s.Client, s.Protocol)
	if err != nil {
		return 0, false, err
	}
	if p != ProtocolVerdictJSON && p != ProtocolGraniteGuardian {
		tasks = tasks[:1] // one question covers both: the model's categories say which
	}
	best, flag := 0.0, false
	for _, t := range tasks {
		cctx, cancel := context.WithTimeout(ctx, to)
		var res *Result
		if p == ProtocolVerdictJSON {
			res, err = s.Client.Check(cctx, t, BuildPrompt(t, "", text))
		} else {
			sub := Subject{Mode: ModePrompt, Text: text}
			if t == TaskInjection {
				sub.Risk = "jailbreak" // Granite Guardian's own injection risk
			}
			res, err = s.Client.CheckNative(cctx, p, sub)
		}
		cancel()
		if err != nil {
			return 0, false, err
		}
		sc := res.PFail
		if !res.HasProbs {
			sc = 0
			if res.Verdict.Verdict == validator.Fail {
				sc = 1
			}
		}
		best = max(best, sc)
		flag = flag || res.Verdict.Verdict == validator.Fail
	}
	return best, flag, nil
}
