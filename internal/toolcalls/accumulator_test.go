package toolcalls

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// chunks feeds each element as one delta's tool_calls array.
func feedOpenAI(t *testing.T, a *Accumulator, chunks ...string) {
	t.Helper()
	for _, c := range chunks {
		a.AddOpenAI(json.RawMessage(c))
	}
	a.Finish()
}

func TestAccumulatorTable(t *testing.T) {
	big := `"` + strings.Repeat("a", 10<<20) + `"`
	cases := []struct {
		name     string
		feed     func(a *Accumulator)
		want     []validator.ToolCall
		problems []string // substrings, in order
	}{
		{
			name: "llama-server stream, two calls",
			feed: func(a *Accumulator) {
				feedOpenAI(t, a,
					`[{"index":0,"id":"c0","type":"function","function":{"name":"send_email","arguments":"{\"to\":"}}]`,
					`[{"index":0,"function":{"arguments":"\"a@b.example\"}"}}]`,
					`[{"index":1,"id":"c1","type":"function","function":{"name":"get_time","arguments":""}}]`,
					`[{"index":1,"function":{"arguments":"{}"}}]`)
			},
			want: []validator.ToolCall{
				{Index: 0, ID: "c0", Name: "send_email", Arguments: `{"to":"a@b.example"}`},
				{Index: 1, ID: "c1", Name: "get_time", Arguments: `{}`},
			},
		},
		{
			name: "non-streaming message without indexes",
			feed: func(a *Accumulator) {
				feedOpenAI(t, a, `[{"id":"a","type":"function","function":{"name":"x","arguments":"{\"q\":1}"}},{"id":"b","type":"function","function":{"name":"y","arguments":"{}"}}]`)
			},
			want: []validator.ToolCall{{Index: 0, ID: "a", Name: "x", Arguments: `{"q":1}`}, {Index: 1, ID: "b", Name: "y", Arguments: `{}`}},
		},
		{
			name: "legacy function_call",
			feed: func(a *Accumulator) {
				a.AddFunctionCall(json.RawMessage(`{"name":"lookup","arguments":"{\"k\":"}`))
				a.AddFunctionCall(json.RawMessage(`{"arguments":"\"v\"}"}`))
				a.Finish()
			},
			want: []validator.ToolCall{{Index: 0, Name: "lookup", Arguments: `{"k":"v"}`}},
		},
		{
			name: "ollama calls arrive whole in successive chunks",
			feed: func(a *Accumulator) {
				a.AddOllama(json.RawMessage(`[{"function":{"name":"get_weather","arguments":{"city":"Bern"}}}]`))
				a.AddOllama(json.RawMessage(`[{"function":{"name":"get_time","arguments":{}}}]`))
				a.Finish()
			},
			want: []validator.ToolCall{
				{Index: 0, Name: "get_weather", Arguments: `{"city":"Bern"}`},
				{Index: 1, Name: "get_time", Arguments: `{}`},
			},
		},
		{
			name: "index gap",
			feed: func(a *Accumulator) {
				feedOpenAI(t, a, `[{"index":0,"id":"a","function":{"name":"x","arguments":"{}"}}]`, `[{"index":2,"id":"c","function":{"name":"z","arguments":"{}"}}]`)
			},
			want: []validator.ToolCall{
				{Index: 0, ID: "a", Name: "x", Arguments: `{}`}, {Index: 1}, {Index: 2, ID: "c", Name: "z", Arguments: `{}`},
			},
			problems: []string{"index 2 skips call 1", "call 1 never arrived"},
		},
		{
			name: "arguments for a call never opened",
			feed: func(a *Accumulator) {
				feedOpenAI(t, a, `[{"index":0,"function":{"arguments":"{\"a\":1}"}}]`)
			},
			want:     []validator.ToolCall{{Index: 0, Arguments: `{"a":1}`}},
			problems: []string{"which no delta opened"},
		},
		{
			name: "non-string arguments",
			feed: func(a *Accumulator) {
				feedOpenAI(t, a, `[{"index":0,"id":"a","function":{"name":"x","arguments":42}}]`, `[{"index":0,"function":{"arguments":[1]}}]`)
			},
			want:     []validator.ToolCall{{Index: 0, ID: "a", Name: "x"}},
			problems: []string{"arguments are a number", "arguments are an array"},
		},
		{
			name: "cut off mid-JSON keeps the text for the tool_call check",
			feed: func(a *Accumulator) {
				feedOpenAI(t, a, `[{"index":0,"id":"a","function":{"name":"x","arguments":"{\"to\":\"a@"}}]`)
			},
			want: []validator.ToolCall{{Index: 0, ID: "a", Name: "x", Arguments: `{"to":"a@`}},
		},
		{
			name: "10 MiB of arguments",
			feed: func(a *Accumulator) {
				feedOpenAI(t, a, `[{"index":0,"id":"a","function":{"name":"x","arguments":"{\"b\":"}}]`, `[{"index":0,"function":{"arguments":`+big+`}}]`)
			},
			want:     []validator.ToolCall{{Index: 0, ID: "a", Name: "x", Arguments: `{"b":`}},
			problems: []string{"longer than 1048576 bytes"},
		},
		{
			name: "renamed call, bad type, huge and negative index, garbage",
			feed: func(a *Accumulator) {
				feedOpenAI(t, a,
					`[{"index":0,"id":"a","type":"function","function":{"name":"x"}}]`,
					`[{"index":0,"id":"b","type":"code","function":{"name":"y"}}]`,
					`[{"index":1000000000,"function":{"name":"z"}}]`,
					`[{"index":-1,"function":{"name":"z"}}]`,
					`{"not":"an array"}`)
			},
			want:     []validator.ToolCall{{Index: 0, ID: "a", Name: "x"}},
			problems: []string{"id changed", "type \"code\"", "function name changed", "past the limit", "negative index", "does not decode"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var a Accumulator
			tc.feed(&a)
			got := a.Calls()
			if len(got) != len(tc.want) {
				t.Fatalf("calls = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("call %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			ps := a.Problems()
			if len(ps) != len(tc.problems) {
				t.Fatalf("problems = %v, want %d matching %q", ps, len(tc.problems), tc.problems)
			}
			for i, p := range ps {
				if !strings.Contains(p.Error(), tc.problems[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, p.Error(), tc.problems[i])
				}
			}
			for _, f := range a.Findings() {
				if f.Reason != validator.ReasonMalformedToolCall || !strings.HasPrefix(f.Path, "tool_calls") {
					t.Errorf("finding %+v: want malformed_tool_call at tool_calls/N", f)
				}
			}
		})
	}
}
