package llm

import (
	"context"
	"strings"
	"sync"
)

// Placeholders the server's chat template renders in place of the user's
// message and the judged text; plain letters, so no template's trim or
// escaping changes them.
const (
	slotUser = "AEGISUSERSLOTq7Zx"
	slotText = "AEGISTEXTSLOTq7Zx"
)

// layout is a guard prompt as the server's own chat template renders it,
// cut at the placeholders: head + user + mid + text + tail (response
// moderation), or head + text + tail (prompt moderation, mid unused).
type layout struct {
	head, mid, tail string
}

// layouts caches the server-rendered layouts per server, model, protocol
// and the template's variables (a missing layout is cached too, as nil).
var layouts sync.Map // string -> *layout

// NativePrompt is protocol p's prompt for s as it is sent to the server
// (BOS left out): rendered by llama-server from the model's own chat
// template (POST /apply-template, once per server and variant) when that
// works, else the built-in rendering of the model card's prompt. The two
// agree for the published templates (the golden files); the server's
// wins when a model's template differs, such as a larger category list.
func (c *Client) NativePrompt(ctx context.Context, p Protocol, s Subject) Prompt {
	n := nativeOf(p)
	if c.Kind == KindLlama {
		if l := c.layout(ctx, p, s); l != nil {
			pr := Prompt{Prefix: l.head, Suffix: l.tail}
			if s.Mode == ModeResponse {
				pr.Prefix += content(n, s.User) + l.mid
			}
			pr.Prefix = strings.TrimPrefix(pr.Prefix+content(n, s.Text), bosText)
			return pr
		}
	}
	return wirePrompt(n, s)
}

// content is a message as the protocol's template inserts it: Llama Guard
// and ShieldGemma trim it.
func content(n native, s string) string {
	switch n.(type) {
	case llamaGuard, shieldGemma:
		return strings.TrimSpace(s)
	}
	return s
}

// templateVars are the variables the protocol's chat template takes.
func templateVars(p Protocol, s Subject) map[string]any {
	switch p {
	case ProtocolGraniteGuardian:
		return map[string]any{"guardian_config": map[string]any{"risk_name": graniteRisk(s)}}
	case ProtocolShieldGemma:
		return map[string]any{"guideline": shieldGuideline(s)}
	}
	return nil
}

func (c *Client) layout(ctx context.Context, p Protocol, s Subject) *layout {
	key := strings.Join([]string{c.BaseURL, c.Model, p.String(), s.Mode.String(), graniteRisk(s), strings.Join(s.Policies, ",")}, " ")
	if v, ok := layouts.Load(key); ok {
		return v.(*layout)
	}
	msgs := []map[string]string{{"role": "user", "content": slotText}}
	if s.Mode == ModeResponse {
		msgs = []map[string]string{{"role": "user", "content": slotUser}, {"role": "assistant", "content": slotText}}
	}
	req := map[string]any{"messages": msgs, "add_generation_prompt": true}
	if v := templateVars(p, s); v != nil {
		req["chat_template_kwargs"] = v
	}
	var out struct {
		Prompt string `json:"prompt"`
	}
	if err := c.post(ctx, "/apply-template", req, &out); err != nil {
		if ctx.Err() == nil {
			layouts.Store(key, (*layout)(nil)) // no such endpoint or template: the built-in prompt
		}
		return nil
	}
	l := cut(out.Prompt, s.Mode)
	layouts.Store(key, l)
	return l
}

// cut splits a rendered prompt at the placeholders. It refuses a prompt
// where they are missing, repeated or out of order, or where nothing
// follows the judged text: a server that continues a last assistant
// message (assistant prefill) renders the response variant that way, and
// the built-in prompt is right then.
func cut(prompt string, m Mode) *layout {
	l := &layout{}
	rest := prompt
	if m == ModeResponse {
		var ok bool
		if l.head, rest, ok = strings.Cut(rest, slotUser); !ok || strings.Contains(rest, slotUser) {
			return nil
		}
	}
	before, after, ok := strings.Cut(rest, slotText)
	if !ok || strings.Contains(after, slotText) || strings.Contains(after, slotUser) || after == "" {
		return nil
	}
	if m == ModeResponse {
		l.mid = before
	} else {
		l.head = before
	}
	l.tail = after
	return l
}
