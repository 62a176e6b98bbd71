package llm

import (
	"context"
	"fmt"
)

// Judgement is one guard call, complete enough to be carried to another
// process (a guard worker) and run there against its own server.
type Judgement struct {
	Protocol string   `json:"protocol"` // a ParseProtocol name; auto is resolved where it runs
	Task     string   `json:"task"`     // a ParseTask name
	Context  string   `json:"context,omitempty"`
	User     string   `json:"user,omitempty"`
	Text     string   `json:"text"`
	Risk     string   `json:"risk,omitempty"`
	Policies []string `json:"policies,omitempty"`
	Loose    bool     `json:"loose,omitempty"` // Qwen3Guard's Controversial passes
	// Prefill asks only to warm the server's prompt cache; no verdict.
	Prefill bool `json:"prefill,omitempty"`
	// RequestID and Attempt name the response judged (see
	// validator.Request); a guard worker logs them with its verdict.
	RequestID string `json:"request_id,omitempty"`
	Attempt   int    `json:"attempt,omitempty"`
}

// Judge runs guard calls: a *Client asks its server directly; a remote
// judge sends the call elsewhere (see Remote).
type Judge interface {
	Judge(ctx context.Context, j Judgement) (*Result, error)
}

// Remote, when set, builds the judge for a Config that names a message
// broker (NATS) instead of a server URL. local is the direct client when
// the Config also has a URL (the fallback while the broker is
// unreachable), nil otherwise.
var Remote func(c Config, local Judge) (Judge, error)

// Judge runs j against the client's server: a prefill (nil result) or a
// verdict in j's protocol.
func (c *Client) Judge(ctx context.Context, j Judgement) (*Result, error) {
	res, err := c.judge(ctx, j)
	if j.Prefill {
		return nil, err
	}
	return res, err
}

// judge is Judge with the server's counts and times for a prefill too
// (a Result without a Verdict), which the guard's scheduling measures.
func (c *Client) judge(ctx context.Context, j Judgement) (*Result, error) {
	proto, err := ParseProtocol(j.Protocol)
	if err != nil {
		return nil, fmt.Errorf("guard llm: %w", err)
	}
	task := TaskSafety
	if j.Task != "" {
		if task, err = ParseTask(j.Task); err != nil {
			return nil, fmt.Errorf("guard llm: %w", err)
		}
	}
	if proto, err = resolveCached(ctx, c, proto); err != nil {
		return nil, err
	}
	if proto == ProtocolVerdictJSON {
		prompt := BuildPrompt(task, j.Context, j.Text)
		if j.Prefill {
			return c.prefill(ctx, prompt)
		}
		return c.Check(ctx, task, prompt)
	}
	s := Subject{Mode: ModeResponse, User: j.User, Text: j.Text, Risk: j.Risk, Policies: j.Policies, Loose: j.Loose}
	if j.Prefill {
		return c.prefill(ctx, c.NativePrompt(ctx, proto, s))
	}
	return c.CheckNative(ctx, proto, s)
}
