package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// ResultOutcome is what the judge did with a tool result.
type ResultOutcome int

// The outcomes of judging a result.
const (
	ResultPassed   ResultOutcome = iota // unchanged
	ResultRedacted                      // secrets replaced, the rest passed
	ResultWithheld                      // replaced by an error result
)

func (o ResultOutcome) String() string {
	switch o {
	case ResultPassed:
		return "passed"
	case ResultRedacted:
		return "redacted"
	case ResultWithheld:
		return "withheld"
	}
	return fmt.Sprintf("ResultOutcome(%d)", int(o))
}

// redactionMark replaces a secret in a result.
const redactionMark = "[REDACTED secret_leak]"

// textRef is one string of a result the checks read, and how to put a
// changed version back.
type textRef struct {
	path string
	text string
	set  func(string)
}

// collectTexts finds the strings of a tool result a model will read: text
// content, embedded resource text, and the structured content.
func collectTexts(res map[string]any) []textRef {
	var refs []textRef
	if content, ok := res["content"].([]any); ok {
		for i, c := range content {
			item, ok := c.(map[string]any)
			if !ok {
				continue
			}
			if s, ok := item["text"].(string); ok {
				refs = append(refs, textRef{fmt.Sprintf("content/%d/text", i), s, func(v string) { item["text"] = v }})
			}
			if r, ok := item["resource"].(map[string]any); ok {
				if s, ok := r["text"].(string); ok {
					refs = append(refs, textRef{fmt.Sprintf("content/%d/resource/text", i), s, func(v string) { r["text"] = v }})
				}
			}
		}
	}
	if sc, ok := res["structuredContent"]; ok {
		refs = append(refs, structuredRefs(sc, "structuredContent", func(v any) { res["structuredContent"] = v })...)
	}
	return refs
}

func structuredRefs(v any, path string, set func(any)) []textRef {
	switch x := v.(type) {
	case string:
		return []textRef{{path, x, func(s string) { set(s) }}}
	case []any:
		var out []textRef
		for i := range x {
			out = append(out, structuredRefs(x[i], fmt.Sprintf("%s/%d", path, i), func(n any) { x[i] = n })...)
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []textRef
		for _, k := range keys {
			out = append(out, structuredRefs(x[k], path+"/"+k, func(n any) { x[k] = n })...)
		}
		return out
	}
	return nil
}

// Judged is what JudgeResult decided about a tool result.
type Judged struct {
	// Result is what to send the client: the server's bytes when nothing
	// changed.
	Result json.RawMessage
	// Verdict is the failing verdict; nil when the result passed untouched.
	// Its findings' offsets point into Text.
	Verdict *validator.Verdict
	Outcome ResultOutcome
	// Text is what the checks read: the result's strings (see
	// collectTexts) as the server sent them, one after another, each
	// ended by a newline.
	Text string
}

// JudgeResult judges a tool result before the client sees it: its size,
// secrets in its text (redacted or withheld, by policy) and injected
// instructions (the guard at the tool-result threshold).
func (j *Judge) JudgeResult(ctx context.Context, id, tool string, raw json.RawMessage) Judged {
	if len(raw) > j.Config.MaxResultBytes {
		v := failVerdict(validator.ReasonLengthExceeded, validator.RiskMedium, validator.Finding{Check: "mcp_result_size",
			Reason: validator.ReasonLengthExceeded, Path: "result",
			Message: fmt.Sprintf("result of %d bytes is over the limit of %d (max_result_bytes)", len(raw), j.Config.MaxResultBytes)})
		return Judged{Result: withheld(tool, v), Verdict: v, Outcome: ResultWithheld}
	}
	var res map[string]any
	if err := json.Unmarshal(raw, &res); err != nil {
		return Judged{Result: raw, Outcome: ResultPassed} // not an object: the client will say what is wrong with it
	}
	refs := collectTexts(res)
	var secrets, other []validator.Finding
	redacted := false
	var text strings.Builder
	for _, r := range refs {
		base := text.Len() // findings are moved from r.text's offsets to text's
		text.WriteString(r.text)
		text.WriteByte('\n')
		v, err := j.checkLeak(id, r.text)
		if err != nil {
			f := validator.Finding{Check: "leak", Reason: validator.ReasonGuardUnavailable, Message: err.Error(), Path: r.path,
				Start: base, End: base + len(r.text)}
			other = append(other, f)
			continue
		}
		nOther, nSecrets := len(other), len(secrets)
		var spans []validator.Finding
		for _, f := range v.Findings {
			if f.Reason == validator.ReasonNone {
				continue
			}
			f.Path = r.path
			if f.Reason == validator.ReasonSecretLeak && f.End > f.Start && f.End <= len(r.text) {
				spans = append(spans, f)
				continue
			}
			other = append(other, f)
		}
		if len(spans) > 0 {
			r.set(redact(r.text, spans))
			redacted = true
			secrets = append(secrets, spans...)
		}
		for _, pf := range screenText(r.path, r.text) {
			if pf.Rule == "invisible" {
				continue // zero-width characters are common in fetched web text
			}
			other = append(other, validator.Finding{Check: "mcp_result_rules", Reason: validator.ReasonPromptInjection,
				Message: "tool result: " + pf.String(), Path: r.path, End: len(r.text)})
		}
		if f := j.guardScore(r.text, r.path, j.resultGuard); f != nil {
			f.Message = "tool result: " + f.Message
			other = append(other, *f)
		}
		shift(other[nOther:], base)
		shift(secrets[nSecrets:], base)
	}
	switch {
	case len(other) > 0 || (len(secrets) > 0 && j.Config.Secrets == SecretRefuse):
		all := append(append([]validator.Finding{}, other...), secrets...)
		v := worst(all)
		return Judged{Result: withheld(tool, v), Verdict: v, Outcome: ResultWithheld, Text: text.String()}
	case redacted:
		v := failVerdict(validator.ReasonSecretLeak, validator.RiskHigh, secrets...)
		b, err := json.Marshal(res)
		if err != nil {
			return Judged{Result: withheld(tool, v), Verdict: v, Outcome: ResultWithheld, Text: text.String()}
		}
		v.Action = validator.ActionRedact
		return Judged{Result: b, Verdict: v, Outcome: ResultRedacted, Text: text.String()}
	}
	return Judged{Result: raw, Outcome: ResultPassed, Text: text.String()}
}

// shift moves the findings' offsets by base.
func shift(fs []validator.Finding, base int) {
	for i := range fs {
		fs[i].Start += base
		fs[i].End += base
	}
}

// checkLeak runs the policy's leak check alone over text.
func (j *Judge) checkLeak(id, text string) (validator.Verdict, error) {
	if j.leak == nil || text == "" {
		return validator.Verdict{Verdict: validator.Pass}, nil
	}
	return j.runChecks(j.leak, id, text, nil, nil, nil)
}

// redact replaces the spans (byte offsets into s) with the redaction mark.
func redact(s string, spans []validator.Finding) string {
	sort.Slice(spans, func(a, b int) bool { return spans[a].Start < spans[b].Start })
	var sb strings.Builder
	at := 0
	for _, f := range spans {
		if f.Start < at {
			if f.End > at {
				at = f.End
			}
			continue
		}
		sb.WriteString(s[at:f.Start])
		sb.WriteString(redactionMark)
		at = f.End
	}
	sb.WriteString(s[at:])
	return sb.String()
}

func failVerdict(reason validator.Reason, risk validator.Risk, findings ...validator.Finding) *validator.Verdict {
	return &validator.Verdict{Verdict: validator.Fail, Risk: risk, Reason: reason, Action: validator.ActionHalt, Findings: findings}
}

// worst builds the verdict of the riskiest finding.
func worst(fs []validator.Finding) *validator.Verdict {
	rank := func(r validator.Reason) validator.Risk {
		switch r {
		case validator.ReasonSecretLeak, validator.ReasonSystemPromptLeak, validator.ReasonPromptInjection, validator.ReasonUnsafeContent:
			return validator.RiskHigh
		case validator.ReasonGuardUnavailable, validator.ReasonLengthExceeded:
			return validator.RiskLow
		}
		return validator.RiskMedium
	}
	best := 0
	for i, f := range fs {
		if rank(f.Reason) > rank(fs[best].Reason) {
			best = i
		}
	}
	return failVerdict(fs[best].Reason, rank(fs[best].Reason), fs...)
}

// withheld is the error result that replaces a refused tool result: the
// model reads why the result is missing.
func withheld(tool string, v *validator.Verdict) json.RawMessage {
	msg := fmt.Sprintf("Aegis withheld the result of tool %q: aegis_%s", tool, v.Reason)
	if len(v.Findings) > 0 && v.Findings[0].Message != "" {
		msg += " (" + v.Findings[0].Message + ")"
	}
	b, _ := json.Marshal(map[string]any{
		"content": []any{map[string]any{"type": "text", "text": msg}},
		"isError": true,
	})
	return b
}
