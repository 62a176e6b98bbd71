package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/guard"
	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// CallPolicy judges a tool call before it reaches the server: allow and
// deny lists, rules over the arguments, egress and shell rules. A nil
// verdict (or one that passes) lets the call through; a failing one
// refuses it with its reason code. Implementations must be safe for
// concurrent use.
type CallPolicy interface {
	CheckCall(ctx context.Context, server string, call validator.ToolCall) *validator.Verdict
}

// CallPolicyFunc adapts a function to CallPolicy.
type CallPolicyFunc func(ctx context.Context, server string, call validator.ToolCall) *validator.Verdict

// CheckCall calls f.
func (f CallPolicyFunc) CheckCall(ctx context.Context, server string, call validator.ToolCall) *validator.Verdict {
	return f(ctx, server, call)
}

// textChecks are the policy's checks that judge text whatever produced
// it, and tool_policy, the check of tool calls (allow and deny lists,
// rules over arguments, egress and shell rules), which judges each call
// as it judges a model's. The others (JSON shape, loops, stalls, length of
// a model's answer, a call's fit to the tools a chat request declared) are
// about a model's output and do not apply to tool traffic.
var textChecks = map[string]bool{"leak": true, "banned": true, "regex": true, "guard": true, "guard_llm": true, "guard_server": true,
	"tool_policy": true}

// Judge holds everything the proxy judges with. Build it with NewJudge;
// it is safe for concurrent use.
type Judge struct {
	Config Config
	// Pins records and compares tool descriptions; nil turns pinning off.
	Pins *Pins
	// Calls is the tool-call policy; nil allows every call the text checks
	// pass.
	Calls CallPolicy
	// Log receives warnings (pin store errors, flagged tools under warn).
	Log *slog.Logger

	text                   *policy.Policy // the policy cut to its text checks
	leak                   *policy.Policy // the policy cut to its leak check (nil when disabled)
	guard                  *guard.Guard   // the embedded classifier; nil when both guard screens are off
	toolGuard, resultGuard float64        // thresholds; 0 is off
}

// NewJudge builds a judge over pol (nil: the default policy) and its mcp
// section.
func NewJudge(pol *policy.Policy) (*Judge, error) {
	if pol == nil {
		pol = policy.Default()
	}
	cfg, err := ConfigFrom(pol)
	if err != nil {
		return nil, err
	}
	j := &Judge{Config: cfg, Log: slog.Default()}
	text := *pol
	text.Checks = nil
	for _, c := range pol.Checks {
		if textChecks[c.Name] {
			text.Checks = append(text.Checks, c)
		}
	}
	text.Constraints = false
	j.text = &text
	if c, ok := pol.Enabled("leak"); ok {
		leak := text
		leak.Checks = []policy.Check{c}
		j.leak = &leak
	}
	j.toolGuard, j.resultGuard = cfg.GuardTools, cfg.GuardResults
	if j.toolGuard > 0 || j.resultGuard > 0 {
		if j.guard, err = guard.Default(); err != nil {
			return nil, fmt.Errorf("mcp: %w", err)
		}
	}
	return j, nil
}

// LogText reports whether the policy allows logging text.
func (j *Judge) LogText() bool { return j.text.LogText }

// fixedClock keeps the checks off the wall clock; nothing ever advances it.
var fixedClock = clock.NewFake(time.Unix(0, 0))

// runChecks runs the checks of p over text as one output, and over call
// (when given) as a tool call the output made; the tool the call names is
// declared with its input schema, as a chat request declares its tools.
func (j *Judge) runChecks(p *policy.Policy, id, text string, call *validator.ToolCall, schema json.RawMessage, earlier []validator.Message) (validator.Verdict, error) {
	if len(p.Checks) == 0 || (text == "" && call == nil) {
		return validator.Verdict{Verdict: validator.Pass, Action: validator.ActionRelease, Risk: validator.RiskLow, Findings: []validator.Finding{}}, nil
	}
	req := &validator.Request{ID: id, Attempt: 1, Messages: earlier}
	if call != nil {
		req.Tools = []validator.Tool{{Name: call.Name, Parameters: schema}}
	}
	a, err := pipeline.New(p, req, pipeline.Options{Clock: fixedClock, Complete: true})
	if err != nil {
		return validator.Verdict{}, err
	}
	a.Write([]byte(text))
	if call != nil {
		a.ToolCall(*call)
	}
	pipeline.Wait(a, a.CloseAt(fixedClock.Now()), fixedClock.Now())
	a.Stop()
	// Every failure refuses: there is no retry between a client and a tool.
	return a.Verdict(1 << 20), nil
}

// guardScore screens text with the embedded classifier's injection head
// and returns a finding when its probability reaches threshold.
func (j *Judge) guardScore(text, path string, threshold float64) *validator.Finding {
	if j.guard == nil || threshold <= 0 || strings.TrimSpace(text) == "" {
		return nil
	}
	for _, s := range j.guard.Model().Scores(text) {
		if s.Head != classifier.HeadInjection || float64(s.Prob) < threshold {
			continue
		}
		return &validator.Finding{Check: "guard", Reason: validator.ReasonPromptInjection, End: len(text), Path: path,
			Message: fmt.Sprintf("%s looks like prompt injection (p=%.3f, threshold %.2f)", path, s.Prob, threshold)}
	}
	return nil
}

// ToolReport is what the judge found about one listed tool.
type ToolReport struct {
	Tool     string
	Findings []validator.Finding
	Action   Action
	Changed  bool            // the tool differs from its pin
	Schema   json.RawMessage // its input schema
}

// JudgeTool screens one listed tool: its description and every string in
// its schemas for poisoning (rules and the guard), and its description
// and input schema against the pin.
func (j *Judge) JudgeTool(ctx context.Context, server string, raw json.RawMessage) (ToolReport, error) {
	var t sdk.Tool
	if err := json.Unmarshal(raw, &t); err != nil {
		return ToolReport{}, fmt.Errorf("tool is not a Tool object: %w", err)
	}
	var fields struct {
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	_ = json.Unmarshal(raw, &fields)
	rep := ToolReport{Tool: t.Name, Schema: fields.InputSchema}
	m := &meta{j: j, item: "tools/" + t.Name}
	m.field("name", t.Name, true)
	m.field("title", t.Title, false)
	m.field("description", t.Description, false)
	if t.Annotations != nil {
		m.field("annotations.title", t.Annotations.Title, false)
	}
	for _, s := range []struct {
		name string
		raw  json.RawMessage
	}{{"inputSchema", fields.InputSchema}, {"outputSchema", fields.OutputSchema}} {
		var v any
		if json.Unmarshal(s.raw, &v) == nil {
			walkSchema(v, s.name, m.field)
		}
	}
	if like, ok := lookalike(t.Name); ok {
		m.findings = append(m.findings, validator.Finding{Check: "mcp_lookalike", Reason: validator.ReasonPromptInjection, Path: m.item + "/name",
			Message: fmt.Sprintf("tool %s: its name is written with look-alike characters and reads as %q", t.Name, like)})
	}
	rep.Findings = m.done()
	poisoned := j.verdict(rep.Findings) != nil
	if poisoned {
		rep.Action = j.Config.Poisoned
	}
	if j.Pins != nil && t.Name != "" {
		pin, changed, err := j.Pins.Check(ctx, server, t.Name, t.Description, canonicalJSON(fields.InputSchema))
		if err != nil {
			return rep, err
		}
		if changed {
			rep.Changed = true
			what := []string{}
			if pin.Description != t.Description {
				what = append(what, "description")
			}
			if pin.Schema != canonicalJSON(fields.InputSchema) {
				what = append(what, "input schema")
			}
			rep.Findings = append(rep.Findings, validator.Finding{Check: "mcp_pin", Reason: validator.ReasonPromptInjection,
				Message: fmt.Sprintf("tool %s changed its %s since it was pinned on %s (approve with: aegis mcp pins approve %s %s)",
					t.Name, strings.Join(what, " and "), pin.PinnedAt.UTC().Format(time.RFC3339), server, t.Name),
				Path: "tools/" + t.Name})
			rep.Action = max(rep.Action, j.Config.Changed)
		}
	}
	return rep, nil
}

// isProse reports whether a tool text at where is written for a reader:
// the description and titles, and the descriptions in its schemas.
func isProse(where string) bool {
	switch where {
	case "description", "title", "annotations.title":
		return true
	}
	return strings.HasSuffix(where, "/description") || strings.HasSuffix(where, "/title")
}

// walkStrings calls f for every string value in v (descriptions, titles,
// enums, defaults) with its JSON path.
func walkStrings(v any, path string, f func(where, text string)) {
	walkSchema(v, path, func(where, text string, name bool) {
		if !name {
			f(where, text)
		}
	})
}

// argumentText joins the string values of a call's arguments, one per
// line, in key order: what the text checks read.
func argumentText(args json.RawMessage) string {
	var v any
	if json.Unmarshal(args, &v) != nil {
		return string(args)
	}
	var sb strings.Builder
	walkStrings(v, "", func(_, s string) {
		sb.WriteString(s)
		sb.WriteByte('\n')
	})
	return sb.String()
}

// JudgeCall judges a tools/call before it reaches the server: the call
// policy, then the policy's checks: the text checks over the argument
// strings, and its tool-call checks (tool_policy) over the call, with the
// tool declared by schema (its input schema from the listing, if seen).
// It returns the failing verdict, or nil to let the call through.
func (j *Judge) JudgeCall(ctx context.Context, server, id string, name string, args, schema json.RawMessage) (*validator.Verdict, error) {
	return j.JudgeCallAfter(ctx, server, id, name, args, schema, nil)
}

// JudgeCallAfter is JudgeCall for a call that follows the session's
// earlier calls and results (earlier: assistant messages holding the
// calls, tool messages holding the results' text). tool_policy's flow
// rule reads them as a chat's tool results: private data an earlier result
// returned may not go to a destination only an earlier result named, and
// a destination only an injected result named is refused. The proxy sees
// no user or system prompt, so a destination nobody named is not refused
// for that alone.
func (j *Judge) JudgeCallAfter(ctx context.Context, server, id string, name string, args, schema json.RawMessage, earlier []validator.Message) (*validator.Verdict, error) {
	call := validator.ToolCall{ID: id, Name: name, Arguments: string(args)}
	if len(args) == 0 {
		call.Arguments = "{}"
	}
	if j.Calls != nil {
		if v := j.Calls.CheckCall(ctx, server, call); v != nil && v.Verdict == validator.Fail {
			return v, nil
		}
	}
	v, err := j.runChecks(j.text, id, argumentText(args), &call, schema, earlier)
	if err != nil {
		return nil, err
	}
	if v.Verdict == validator.Fail {
		return &v, nil
	}
	return nil, nil
}
