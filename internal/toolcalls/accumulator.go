// Package toolcalls assembles the tool calls a model streams into whole
// calls the checks can judge: OpenAI chat `tool_calls` deltas (each with an
// index, the id and name in its first delta and the arguments in pieces),
// the legacy single `function_call`, and Ollama's `message.tool_calls`,
// whose calls arrive whole with their arguments as a JSON object.
//
// Broken input never panics and never grows without bound: a delta that
// does not fit (an index past the last call plus one, arguments for a call
// that was never opened, arguments that are not a string, an id or name
// that changes, arguments past the size limit) is a Problem naming the call,
// turned by Findings into a malformed_tool_call finding at that call.
package toolcalls

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Limits bound what one choice's tool calls may hold.
type Limits struct {
	// MaxCalls is the most calls one choice may make (default 64).
	MaxCalls int
	// MaxArgs is the most bytes one call's arguments may hold (default
	// 1 MiB). Arguments past it are dropped and the call has a Problem.
	MaxArgs int
}

// DefaultLimits are the limits of a zero Accumulator.
var DefaultLimits = Limits{MaxCalls: 64, MaxArgs: 1 << 20}

// Problem is one thing wrong with the deltas of a call.
type Problem struct {
	// Index is the call's index (-1 when the delta named none usable).
	Index   int
	Message string
}

func (p Problem) Error() string {
	if p.Index < 0 {
		return "tool_calls: " + p.Message
	}
	return fmt.Sprintf("tool_calls/%d: %s", p.Index, p.Message)
}

type call struct {
	opened bool // an id or a name arrived
	id     string
	typ    string
	name   string
	args   []byte
	over   bool // arguments passed MaxArgs
}

// Accumulator assembles the tool calls of one choice. The zero value is
// ready to use with DefaultLimits. It is used by one goroutine at a time.
type Accumulator struct {
	Limits   Limits
	calls    []call
	problems []Problem
	seen     map[string]bool // problems already reported
}

func (a *Accumulator) limits() Limits {
	l := a.Limits
	if l.MaxCalls <= 0 {
		l.MaxCalls = DefaultLimits.MaxCalls
	}
	if l.MaxArgs <= 0 {
		l.MaxArgs = DefaultLimits.MaxArgs
	}
	return l
}

func (a *Accumulator) problem(i int, format string, args ...any) {
	p := Problem{Index: i, Message: fmt.Sprintf(format, args...)}
	key := strconv.Itoa(i) + "\x00" + p.Message
	if a.seen[key] {
		return
	}
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	a.seen[key] = true
	a.problems = append(a.problems, p)
}

// Delta is one piece of one call, in the shape every dialect reduces to.
type Delta struct {
	// Index is the call's index; nil means the position given to Add.
	Index *int
	ID    string
	Type  string
	Name  string
	// Arguments is the raw JSON of the arguments field: a JSON string
	// holding a piece of the arguments text (OpenAI), an object (Ollama)
	// or nil when absent.
	Arguments json.RawMessage
	// Whole says the piece is a whole call (Ollama's): without an Index
	// it takes the next free index rather than its position, so the calls
	// of successive chunks do not overwrite each other.
	Whole bool
}

// Add takes one delta; pos is its position among the deltas of its chunk,
// used when it carries no index.
func (a *Accumulator) Add(d Delta, pos int) {
	lim := a.limits()
	idx := pos
	switch {
	case d.Index != nil:
		idx = *d.Index
	case d.Whole:
		idx = len(a.calls)
	}
	switch {
	case idx < 0:
		a.problem(-1, "negative index %d", idx)
		return
	case idx >= lim.MaxCalls:
		a.problem(-1, "index %d is past the limit of %d calls", idx, lim.MaxCalls)
		return
	case idx > len(a.calls):
		a.problem(idx, "index %d skips call %d (calls so far: %d)", idx, len(a.calls), len(a.calls))
		for len(a.calls) < idx {
			a.calls = append(a.calls, call{})
		}
	}
	if idx == len(a.calls) {
		a.calls = append(a.calls, call{})
	}
	c := &a.calls[idx]
	if d.ID != "" {
		switch {
		case c.id == "":
			c.id = d.ID
		case c.id != d.ID:
			a.problem(idx, "id changed from %q to %q", c.id, d.ID)
		}
		c.opened = true
	}
	if d.Type != "" {
		switch {
		case d.Type != "function":
			a.problem(idx, "type %q is not \"function\"", d.Type)
		case c.typ == "":
			c.typ = d.Type
		}
	}
	if d.Name != "" {
		switch {
		case c.name == "":
			c.name = d.Name
		case c.name != d.Name:
			a.problem(idx, "function name changed from %q to %q", c.name, d.Name)
		}
		c.opened = true
	}
	args := bytes.TrimSpace(d.Arguments)
	if len(args) == 0 || string(args) == "null" {
		return
	}
	var piece []byte
	switch args[0] {
	case '"':
		var s string
		if err := json.Unmarshal(args, &s); err != nil {
			a.problem(idx, "arguments are not a JSON string: %v", err)
			return
		}
		piece = []byte(s)
	case '{':
		// Ollama's arguments: a whole object, kept as its JSON text.
		if !json.Valid(args) {
			a.problem(idx, "arguments object is not valid JSON")
			return
		}
		if len(c.args) > 0 {
			a.problem(idx, "an arguments object after arguments text")
			return
		}
		piece = args
	default:
		a.problem(idx, "arguments are %s, want a string or an object", kindOf(args[0]))
		return
	}
	if len(piece) > 0 && !c.opened {
		a.problem(idx, "arguments for call %d, which no delta opened with an id or a name", idx)
	}
	if c.over {
		return
	}
	if len(c.args)+len(piece) > lim.MaxArgs {
		c.over = true
		a.problem(idx, "arguments are longer than %d bytes", lim.MaxArgs)
		return
	}
	c.args = append(c.args, piece...)
}

func kindOf(b byte) string {
	switch {
	case b == '[':
		return "an array"
	case b == 't' || b == 'f':
		return "a boolean"
	case b == '-' || (b >= '0' && b <= '9'):
		return "a number"
	}
	return "not JSON"
}

// wireDelta is an OpenAI tool_calls element.
type wireDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		// Index is where some Ollama versions put a call's index.
		Index *int `json:"index"`
	} `json:"function"`
}

// AddOpenAI takes the tool_calls array of one OpenAI chat delta (or of a
// whole non-streaming message, whose elements carry no index). An array
// that does not decode is an error and a Problem.
func (a *Accumulator) AddOpenAI(raw json.RawMessage) error {
	ds, err := AppendOpenAI(nil, raw)
	if err != nil {
		a.problem(-1, "%v", err)
		return err
	}
	for i, d := range ds {
		a.Add(d, i)
	}
	return nil
}

// AddFunctionCall takes the legacy function_call object of one delta (or
// message): always call 0.
func (a *Accumulator) AddFunctionCall(raw json.RawMessage) error {
	ds, err := AppendFunctionCall(nil, raw)
	if err != nil {
		a.problem(-1, "%v", err)
		return err
	}
	for i, d := range ds {
		a.Add(d, i)
	}
	return nil
}

// AddOllama takes the tool_calls array of one Ollama /api/chat message.
// Ollama sends each call whole; a call without an index takes the next
// free one.
func (a *Accumulator) AddOllama(raw json.RawMessage) error {
	ds, err := AppendOllama(nil, raw)
	if err != nil {
		a.problem(-1, "%v", err)
		return err
	}
	for i, d := range ds {
		a.Add(d, i)
	}
	return nil
}

// AppendOpenAI decodes an OpenAI tool_calls array (a chat delta's or a
// whole message's) into pieces appended to dst. Decoding is all a
// dialect does with calls: the Accumulator assembles them.
func AppendOpenAI(dst []Delta, raw json.RawMessage) ([]Delta, error) {
	ds, err := decodeWire(raw, "tool_calls")
	for _, d := range ds {
		dst = append(dst, Delta{Index: d.Index, ID: d.ID, Type: d.Type, Name: d.Function.Name, Arguments: d.Function.Arguments})
	}
	return dst, err
}

// AppendFunctionCall decodes the legacy function_call object into a piece
// of call 0 appended to dst; null adds nothing.
func AppendFunctionCall(dst []Delta, raw json.RawMessage) ([]Delta, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return dst, nil
	}
	var f struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return dst, fmt.Errorf("function_call does not decode: %w", err)
	}
	zero := 0
	return append(dst, Delta{Index: &zero, Name: f.Name, Arguments: f.Arguments}), nil
}

// AppendOllama decodes the tool_calls array of an Ollama message (whole
// calls, arguments as an object) into pieces appended to dst.
func AppendOllama(dst []Delta, raw json.RawMessage) ([]Delta, error) {
	ds, err := decodeWire(raw, "message.tool_calls")
	for _, d := range ds {
		idx := d.Function.Index
		if idx == nil {
			idx = d.Index
		}
		dst = append(dst, Delta{Index: idx, ID: d.ID, Name: d.Function.Name, Arguments: d.Function.Arguments, Whole: true})
	}
	return dst, err
}

func decodeWire(raw json.RawMessage, what string) ([]wireDelta, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var ds []wireDelta
	if err := json.Unmarshal(raw, &ds); err != nil {
		return nil, fmt.Errorf("%s does not decode: %w", what, err)
	}
	return ds, nil
}

// Len returns how many calls were opened (the highest index plus one).
func (a *Accumulator) Len() int { return len(a.calls) }

// Calls returns the calls so far in index order, arguments as text.
func (a *Accumulator) Calls() []validator.ToolCall {
	out := make([]validator.ToolCall, len(a.calls))
	for i, c := range a.calls {
		out[i] = validator.ToolCall{Index: i, ID: c.id, Name: c.name, Arguments: string(c.args)}
	}
	return out
}

// Problems returns what was wrong with the deltas, in the order seen.
func (a *Accumulator) Problems() []Problem { return a.problems }

// Finish records what only the end shows: a call that no delta opened
// (a gap left by a skipped index, or arguments alone).
func (a *Accumulator) Finish() {
	for i, c := range a.calls {
		if !c.opened && len(c.args) == 0 && !c.over {
			a.problem(i, "call %d never arrived (no id, name or arguments)", i)
		}
	}
}

// Findings turns the problems into malformed_tool_call findings of the
// tool_call check, located at their call, sorted by call.
func (a *Accumulator) Findings() []validator.Finding {
	out := make([]validator.Finding, 0, len(a.problems))
	for _, p := range a.problems {
		path := "tool_calls"
		if p.Index >= 0 {
			path += "/" + strconv.Itoa(p.Index)
		}
		out = append(out, validator.Finding{
			Check: "tool_call", Reason: validator.ReasonMalformedToolCall,
			Message: p.Message, Path: path,
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
