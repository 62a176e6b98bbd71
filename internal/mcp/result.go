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
// changed version back. A blob is base64 text (its mime type in mime)
// that is judged decoded and never changed.
type textRef struct {
	path string
	text string
	set  func(string)
	blob bool
	mime string
	meta bool // a resource link's name, title or description
}

// collectTexts finds the strings of a tool result (or of a prompt's
// messages, or of a resource's contents) a model will read: text content,
// embedded resources' text and blobs, resource links' names, titles and
// descriptions, and the structured content.
func collectTexts(res map[string]any) []textRef {
	var refs []textRef
	if content, ok := res["content"].([]any); ok {
		refs = append(refs, contentRefs(content, "content")...)
	}
	if sc, ok := res["structuredContent"]; ok {
		refs = append(refs, structuredRefs(sc, "structuredContent", func(v any) { res["structuredContent"] = v })...)
	}
	return refs
}

// contentRefs finds the texts of a list of content items (a result's
// content, a resources/read's contents).
func contentRefs(content []any, path string) []textRef {
	var refs []textRef
	for i, c := range content {
		item, ok := c.(map[string]any)
		if !ok {
			continue
		}
		refs = append(refs, itemRefs(item, fmt.Sprintf("%s/%d", path, i))...)
	}
	return refs
}

// itemRefs finds the texts of one content block or resource contents.
func itemRefs(item map[string]any, path string) []textRef {
	var refs []textRef
	if s, ok := item["text"].(string); ok {
		refs = append(refs, textRef{path: path + "/text", text: s, set: func(v string) { item["text"] = v }})
	}
	if s, ok := item["blob"].(string); ok {
		mime, _ := item["mimeType"].(string)
		refs = append(refs, textRef{path: path + "/blob", text: s, blob: true, mime: mime})
	}
	if r, ok := item["resource"].(map[string]any); ok {
		refs = append(refs, itemRefs(r, path+"/resource")...)
	}
	if t, _ := item["type"].(string); t == "resource_link" {
		for _, k := range []string{"name", "title", "description"} {
			if s, ok := item[k].(string); ok {
				refs = append(refs, textRef{path: path + "/" + k, text: s, meta: true})
			}
		}
	}
	return refs
}

func structuredRefs(v any, path string, set func(any)) []textRef {
	switch x := v.(type) {
	case string:
		return []textRef{{path: path, text: x, set: func(s string) { set(s) }}}
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
	redacted, cleaned := false, false
	var text strings.Builder
	for _, r := range refs {
		base := text.Len() // findings are moved from r.text's offsets to text's
		text.WriteString(r.text)
		text.WriteByte('\n')
		if r.blob || r.meta {
			fs, _ := j.screenRef(r)
			other = append(other, fs...)
			continue
		}
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
			r.text = redact(r.text, spans)
			r.set(r.text)
			redacted = true
			secrets = append(secrets, spans...)
		}
		fs, c := j.screenRef(r)
		other = append(other, fs...)
		cleaned = cleaned || c
		shift(other[nOther:], base)
		shift(secrets[nSecrets:], base)
	}
	if v := j.verdict(other); v != nil || (len(secrets) > 0 && j.Config.Secrets == SecretRefuse) {
		if v == nil {
			v = j.verdict(secrets)
		}
		if v == nil {
			v = failVerdict(validator.ReasonSecretLeak, validator.RiskHigh, secrets...)
		}
		return Judged{Result: withheld(tool, v), Verdict: v, Outcome: ResultWithheld, Text: text.String()}
	}
	switch {
	case redacted:
		v := failVerdict(validator.ReasonSecretLeak, validator.RiskHigh, secrets...)
		b, err := json.Marshal(res)
		if err != nil {
			return Judged{Result: withheld(tool, v), Verdict: v, Outcome: ResultWithheld, Text: text.String()}
		}
		v.Action = validator.ActionRedact
		return Judged{Result: b, Verdict: v, Outcome: ResultRedacted, Text: text.String()}
	case cleaned: // escapes or invisible runs removed: the model reads what a person sees
		if b, err := json.Marshal(res); err == nil {
			return Judged{Result: b, Outcome: ResultPassed, Text: text.String()}
		}
	}
	return Judged{Result: raw, Outcome: ResultPassed, Text: text.String()}
}

// screenRef screens one text of a result: a blob decoded, a resource
// link's words as metadata, any other text as a document (cleaned of
// escapes and invisible runs in place). Secrets are the leak check's.
func (j *Judge) screenRef(r textRef) (fs []validator.Finding, changed bool) {
	switch {
	case r.blob:
		return j.blob(r.path, r.mime, r.text), false
	case r.meta:
		m := &meta{j: j, item: r.path}
		m.field("text", r.text, false)
		return m.done(), false
	}
	clean, fs := j.document(r.path, r.text)
	if clean != r.text && r.set != nil {
		r.set(clean)
		changed = true
	}
	return fs, changed
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
