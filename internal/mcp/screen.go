package mcp

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/guard"
	"github.com/aegis-sentinel/aegis/internal/guard/reveal"
	"github.com/aegis-sentinel/aegis/internal/guard/textnorm"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Every server-to-client text is screened here, by one of two rules,
// with the shared guard's screens and the policy's verdict (Decide): this
// package holds no patterns or rankings of its own.
//
//   - metadata: what a server writes about a tool, prompt or resource
//     (names, titles, descriptions, schema strings) describes it; hidden
//     text of any kind, or a sign that it instructs the model
//     (guard.ToolTextSigns, and the classifier at guard_tools over the
//     prose), flags it.
//   - documents: what the model reads as data (tool results, resource
//     contents, prompt messages, the messages of a sampling request) go
//     through the guard's document screen (guard.ScoreToolResult) as the
//     model will read them (reveal.Text: escapes and invisible characters
//     removed, tag characters and base64 blobs decoded). Terminal escapes,
//     bidi controls and zero-width runs are removed from what is
//     forwarded; text smuggled in tag characters is a finding.

// meta collects the findings and the prose of one listed item (a tool, a
// prompt, a resource).
type meta struct {
	j        *Judge
	item     string // "tools/NAME", "prompts/NAME", "resources/URI"
	findings []validator.Finding
	prose    strings.Builder // what the classifier reads: the item's own words
}

// field screens one metadata string at where (under the item). Names are
// read as the words they spell.
func (m *meta) field(where, text string, name bool) {
	if text == "" {
		return
	}
	path := m.item + "/" + where
	rep := reveal.Text(text)
	if rep.Changed() {
		kinds := make([]string, 0, 4)
		for _, k := range rep.Found() {
			kinds = append(kinds, k.String())
		}
		m.findings = append(m.findings, validator.Finding{Check: "mcp_hidden_text", Reason: validator.ReasonPromptInjection, Path: path,
			End: len(text), Message: fmt.Sprintf("%s: %s hide text from a reader in %s", m.item, strings.Join(kinds, " and "), where)})
	}
	judged := rep.Judged()
	if name {
		judged = guard.Words(judged)
	}
	for _, s := range guard.ToolTextSigns(judged) {
		m.findings = append(m.findings, validator.Finding{Check: "guard", Reason: validator.ReasonPromptInjection, Path: path,
			End: len(text), Message: fmt.Sprintf("%s: %s in %s (%s)", m.item, s.Why, where, s.Rule)})
	}
	if name || isProse(where) {
		m.prose.WriteString(judged)
		m.prose.WriteByte('\n')
	}
}

// done runs the classifier over a tool's prose (tool descriptions only:
// a prompt's own description reads like a prompt to it, and
// server-everything's "A prompt with no arguments" scores p 0.98) and
// returns the findings.
func (m *meta) done() []validator.Finding {
	if !strings.HasPrefix(m.item, "tools/") {
		return m.findings
	}
	if f := m.j.guardScore(m.prose.String(), m.item, m.j.toolGuard); f != nil {
		f.Message = fmt.Sprintf("%s: its description %s", m.item, strings.TrimPrefix(f.Message, m.item+" "))
		m.findings = append(m.findings, *f)
	}
	return m.findings
}

// document screens one text the model reads as data. It returns the text
// to forward (clean) and the findings, their offsets into text.
func (j *Judge) document(path, text string) (clean string, fs []validator.Finding) {
	rep := reveal.Text(text)
	clean = text
	if rep.Changed() && utf8.ValidString(text) {
		clean = rep.Clean
	}
	if rep.Hidden != "" {
		fs = append(fs, validator.Finding{Check: "mcp_hidden_text", Reason: validator.ReasonPromptInjection, Path: path, End: len(text),
			Message: fmt.Sprintf("%s: text hidden in Unicode tag characters (%d characters)", path, rep.Count[reveal.Tags])})
	}
	if j.guard == nil || j.resultGuard <= 0 {
		return clean, fs
	}
	judged := rep.Judged()
	if f := j.scoreDocument(path, judged); f != nil {
		f.End = len(text)
		fs = append(fs, *f)
		return clean, fs
	}
	for _, p := range textnorm.Payloads(judged) { // base64 inside the text: the model can decode it
		if f := j.scoreDocument(path, p); f != nil {
			f.Message += " (in base64 inside the text)"
			f.End = len(text)
			fs = append(fs, *f)
			break
		}
	}
	return clean, fs
}

// scoreDocument runs the guard's document screen; a finding at medium
// risk or above.
func (j *Judge) scoreDocument(path, text string) *validator.Finding {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	s := j.guard.ScoreToolResult(text)
	if s.Risk < validator.RiskMedium {
		return nil
	}
	return &validator.Finding{Check: "guard", Reason: validator.ReasonPromptInjection, Path: path,
		Message: fmt.Sprintf("%s looks like prompt injection: %s", path, s.Why)}
}

// blob screens a base64 blob (an embedded resource's or a resource's
// contents) as a document when it decodes to text.
func (j *Judge) blob(path, mime, b64 string) []validator.Finding {
	if !reveal.TextMIME(mime) {
		return nil
	}
	text, ok := reveal.Blob(b64)
	if !ok {
		return nil
	}
	_, fs := j.document(path, text)
	for i := range fs {
		fs[i].Start, fs[i].End = 0, 0 // the offsets were into the decoded text
		fs[i].Message += " (decoded from base64)"
	}
	return fs
}

// verdict is the policy's verdict over findings (Decide); nil when it
// passes (every finding's reason released by the policy). Every failure
// refuses: there is no retry between a client and a server.
func (j *Judge) verdict(fs []validator.Finding) *validator.Verdict {
	if len(fs) == 0 {
		return nil
	}
	v := j.text.Decide(fs, 1)
	if v.Verdict != validator.Fail {
		return nil
	}
	v.Action = validator.ActionHalt
	return &v
}

// lookalike reports a tool name written with characters that pass for
// Latin ones (a Cyrillic "а" in "reаd_file"): its folded form is plain
// ASCII and differs from the name. A name written wholly in another
// script is not one.
func lookalike(name string) (string, bool) {
	if isASCII(name) {
		return "", false
	}
	folded := textnorm.Normalize(guard.Words(name))
	if !isASCII(folded) || folded == strings.ToLower(guard.Words(name)) {
		return "", false
	}
	return strings.ReplaceAll(folded, " ", "_"), true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// skeleton is what two names that look alike share.
func skeleton(name string) string {
	return strings.ReplaceAll(textnorm.Normalize(guard.Words(name)), " ", "")
}

// walkSchema calls f for every string in a JSON schema (descriptions,
// titles, enums, defaults) with its path, and for every property name
// (name true).
func walkSchema(v any, path string, f func(where, text string, name bool)) {
	switch x := v.(type) {
	case string:
		f(path, x, false)
	case []any:
		for i, e := range x {
			walkSchema(e, fmt.Sprintf("%s/%d", path, i), f)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if strings.HasSuffix(path, "/properties") {
				f(path+"/"+k, k, true)
			}
			walkSchema(x[k], path+"/"+k, f)
		}
	}
}
