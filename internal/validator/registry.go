package validator

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
)

// Message is one chat message as the checks see it: a role and its text.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Name is a tool result's function name (role "function", or "tool"
	// when the client sets it).
	Name string `json:"name,omitempty"`
	// ToolCallID is the call a tool result answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ResponseFormat is the request's response_format, reduced to what checks use.
type ResponseFormat struct {
	// Type is "text", "json_object" or "json_schema".
	Type string `json:"type"`
	// Schema is the JSON Schema for "json_schema" (and for llama-server's
	// "json_object" with a schema), or nil.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// Tool is one function the request declares.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Request is what a check may know about the request whose output it
// judges. The gateway and `aegis check` build it from an OpenAI chat
// completion request; the validator packages do not depend on wire types.
type Request struct {
	Messages       []Message
	ResponseFormat *ResponseFormat
	Tools          []Tool
	// MaxTokens is the request's max_tokens (0 when absent).
	MaxTokens int
	// ID and Attempt name the response being judged: the gateway's
	// request id and the attempt's number (1 for the first). A check that
	// asks another process (a guard worker) passes them on, so that
	// process's log names the response it judged.
	ID      string
	Attempt int
	// Unjudged is the policy's action for text a guard could not judge
	// (its rule for guard_unavailable), set by the pipeline. A guard that
	// gives up on a span of text always reports it with a guard_unavailable
	// finding; under release it lets the span go (the finding is a note),
	// under any other action it holds the span and the finding fails the
	// output. Empty outside a pipeline: the guard's own default decides.
	Unjudged Action

	memo map[string]any
}

// ReleasesUnjudged reports whether a guard lets go of text it could not
// judge: the policy's rule (Unjudged) when set, else def.
func (r *Request) ReleasesUnjudged(def bool) bool {
	if r == nil || r.Unjudged == "" {
		return def
	}
	return r.Unjudged == ActionRelease
}

// Memo returns the value stored under key, computing it with f the first
// time. Checks use it to share work derived from the request (the
// constraints compiled from the prompt) across the checks of one
// attempt. It is not safe for concurrent use, like the Request itself.
func (r *Request) Memo(key string, f func() any) any {
	if v, ok := r.memo[key]; ok {
		return v
	}
	if r.memo == nil {
		r.memo = make(map[string]any)
	}
	v := f()
	r.memo[key] = v
	return v
}

// System returns the concatenated system (and developer) messages.
func (r *Request) System() string {
	var s string
	for _, m := range r.Messages {
		if m.Role == "system" || m.Role == "developer" {
			if s != "" {
				s += "\n"
			}
			s += m.Content
		}
	}
	return s
}

// WantsJSON reports whether the request asks for JSON output.
func (r *Request) WantsJSON() bool {
	return r.ResponseFormat != nil && (r.ResponseFormat.Type == "json_object" || r.ResponseFormat.Type == "json_schema")
}

// Spec describes a check: its name, documentation, configuration and
// constructor. One Spec serves as constructor, docs (`aegis validators`)
// and policy schema.
type Spec struct {
	// Name is the registry name, lower_snake_case, such as "json_syntax".
	Name string
	// Summary is one line for listings.
	Summary string
	// Doc explains what the check catches, how, and what it holds back.
	Doc string
	// Reasons are the reason codes the check can report.
	Reasons []Reason
	// Example is a policy YAML fragment that enables and configures the
	// check, shown by `aegis validators`. It must decode with Config.
	Example string
	// Config returns a pointer to a fresh configuration value, with its
	// defaults set, into which the policy's section for this check is
	// strictly decoded. Nil means the check takes no configuration.
	Config func() any
	// New builds the check for one attempt, given the decoded
	// configuration (the value Config returned, or nil) and the request.
	// It returns a nil Validator and a nil error when the check does not
	// apply to this request (json_syntax when no JSON was asked for).
	New func(cfg any, req *Request) (Validator, error)
	// Arguments, when set, builds the check to read the text of a tool
	// call's argument values (each value, its decodings, and the values
	// joined) the way it reads output text. Nil means the check does not
	// read arguments. It may return a nil Validator, as New may.
	Arguments func(cfg any, req *Request) (Validator, error)
	// AnswerOnly says the check judges the form of the answer (JSON,
	// length, instructions on format): the model's reasoning is not fed
	// to it. Every other check reads reasoning as it reads text.
	AnswerOnly bool
}

// Registry holds Specs by name. The zero value is empty and ready to use.
type Registry struct {
	mu    sync.RWMutex
	specs map[string]Spec
}

// Default is the registry policies resolve check names in unless told
// otherwise. It starts empty: the commands fill it with the built-in
// checks (checks.RegisterDefault) before they read a policy.
var Default = &Registry{}

// Register adds a spec. It panics on an empty name, a nil New, or a
// duplicate name: those are programming errors found at start-up.
func (r *Registry) Register(s Spec) {
	if s.Name == "" || s.New == nil {
		panic(fmt.Sprintf("validator: invalid spec %q: name and New are required", s.Name))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.specs == nil {
		r.specs = make(map[string]Spec)
	}
	if _, dup := r.specs[s.Name]; dup {
		panic(fmt.Sprintf("validator: duplicate spec %q", s.Name))
	}
	r.specs[s.Name] = s
}

// Lookup returns the spec with the given name.
func (r *Registry) Lookup(name string) (Spec, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.specs[name]
	return s, ok
}

// All returns every spec, sorted by name.
func (r *Registry) All() []Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Spec, 0, len(r.specs))
	for _, s := range r.specs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ToolName returns the function a tool result at messages[i] answers: its
// own name, else the name of the earlier assistant call with its
// tool_call_id ("" when neither says).
func (r *Request) ToolName(i int) string {
	m := r.Messages[i]
	if m.Name != "" {
		return m.Name
	}
	for j := i - 1; j >= 0; j-- {
		for _, c := range r.Messages[j].ToolCalls {
			if c.ID != "" && c.ID == m.ToolCallID {
				return c.Name
			}
		}
	}
	return ""
}
