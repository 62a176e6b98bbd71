package openai

import (
	"encoding/json"
	"testing"
)

func TestContentShapes(t *testing.T) {
	tests := []struct {
		name, in, text string
		reencode       string
	}{
		{"string", `"hello"`, "hello", `"hello"`},
		{"null", `null`, "", `null`},
		{"parts", `[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]`, "a\nb",
			`[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]`},
		{"empty parts", `[]`, "", `[]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Content
			if err := json.Unmarshal([]byte(tc.in), &c); err != nil {
				t.Fatal(err)
			}
			if got := c.String(); got != tc.text {
				t.Errorf("String = %q, want %q", got, tc.text)
			}
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.reencode {
				t.Errorf("re-encoded %s, want %s", b, tc.reencode)
			}
		})
	}
	var c Content
	if err := json.Unmarshal([]byte(`42`), &c); err == nil {
		t.Error("number content accepted")
	}
}

func TestValidatorRequest(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"system","content":"Be brief."},
	{"role":"user","content":[{"type":"text","text":"Hi"}]},
	{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}],
	"max_tokens":64,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},
	"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],
	"cache_prompt":true}`
	var r ChatRequest
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	vr := r.ValidatorRequest()
	if vr.System() != "Be brief." || vr.Messages[1].Content != "Hi" {
		t.Errorf("messages = %+v", vr.Messages)
	}
	if !vr.WantsJSON() || string(vr.ResponseFormat.Schema) != `{"type":"object"}` {
		t.Errorf("response format = %+v", vr.ResponseFormat)
	}
	if len(vr.Tools) != 1 || vr.Tools[0].Name != "get_weather" || vr.MaxTokens != 64 {
		t.Errorf("tools/max_tokens = %+v %d", vr.Tools, vr.MaxTokens)
	}
	tc := r.Messages[2].ToolCalls[0].Validator(3)
	if tc.Name != "f" || tc.Index != 3 || tc.Arguments != "{}" {
		t.Errorf("tool call = %+v", tc)
	}
}

func FuzzContent(f *testing.F) {
	for _, s := range []string{`"x"`, `null`, `[{"type":"text","text":"a"}]`, `[1]`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var c Content
		if json.Unmarshal([]byte(s), &c) != nil {
			return
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("re-encode %q: %v", s, err)
		}
		var c2 Content
		if err := json.Unmarshal(b, &c2); err != nil || c2.String() != c.String() {
			t.Fatalf("round trip %q -> %s: %v", s, b, err)
		}
	})
}

// plainStringCases are JSON strings (and near misses) that plainString
// must decode as encoding/json does, or leave to it.
var plainStringCases = []struct{ name, in string }{
	{"plain", `"Tell me a story."`},
	{"empty", `""`},
	{"non-ASCII", `"modèle   ok"`},
	{"escape", `"a\nb"`},
	{"unicode escape", `"\u00e9"`},
	{"invalid UTF-8", "\"a\xffb\""},
	{"control character", "\"a\tb\""},
	{"inner quote", `"a"b"`},
	{"unterminated", `"abc`},
	{"lone quote", `"`},
	{"not a string", `12`},
}

func checkPlainString(t *testing.T, in []byte) {
	t.Helper()
	got, ok := plainString(in)
	if !ok {
		return
	}
	var want string
	if err := json.Unmarshal(in, &want); err != nil || got != want {
		t.Fatalf("plainString(%q) = %q, json.Unmarshal: %q, %v", in, got, want, err)
	}
}

func TestPlainStringMatchesJSON(t *testing.T) {
	for _, c := range plainStringCases {
		t.Run(c.name, func(t *testing.T) { checkPlainString(t, []byte(c.in)) })
	}
	if _, ok := plainString([]byte(`"Tell me a story."`)); !ok {
		t.Fatal("a plain string was left to encoding/json")
	}
}

func FuzzPlainString(f *testing.F) {
	for _, c := range plainStringCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkPlainString(t, in) })
}
