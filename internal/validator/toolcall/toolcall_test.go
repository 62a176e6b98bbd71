package toolcall

import (
	"bytes"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/jsonsyntax"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

var tools = []validator.Tool{
	{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"],"additionalProperties":false}`)},
	{Name: "now"},
	{Name: "open", Parameters: []byte(`{}`)},
	{Name: "search", Parameters: []byte(`{"type":"object","properties":{"q":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["q"]}`)},
}

var cases = []struct {
	name string
	call validator.ToolCall
	path string // "" when the call is fine
	at   int
}{
	{"weather ok", validator.ToolCall{Name: "get_weather", Arguments: `{"location":"Paris","unit":"celsius"}`}, "", 0},
	{"weather minimal", validator.ToolCall{Name: "get_weather", Arguments: `{"location":"Tōkyō"}`}, "", 0},
	{"no params empty args", validator.ToolCall{Name: "now", Arguments: ``}, "", 0},
	{"no params object", validator.ToolCall{Name: "now", Arguments: `{}`}, "", 0},
	{"no params anything json", validator.ToolCall{Name: "now", Arguments: `{"tz":"UTC"}`}, "", 0},
	{"search ok", validator.ToolCall{Index: 1, Name: "search", Arguments: " {\"q\": \"go generics\", \"limit\": 5}\n"}, "", 0},
	{"unknown function", validator.ToolCall{Index: 2, Name: "delete_everything", Arguments: `{}`}, "tool_calls/2/name", 0},
	{"case matters", validator.ToolCall{Name: "Get_Weather", Arguments: `{"location":"x"}`}, "tool_calls/0/name", 0},
	{"args not json", validator.ToolCall{Name: "get_weather", Arguments: `location=Paris`}, "tool_calls/0/arguments", 0},
	{"args single quotes", validator.ToolCall{Name: "get_weather", Arguments: `{'location':'Paris'}`}, "tool_calls/0/arguments", 1},
	{"args truncated", validator.ToolCall{Name: "get_weather", Arguments: `{"location":"Par`}, "tool_calls/0/arguments", 16},
	{"args trailing comma", validator.ToolCall{Name: "search", Arguments: `{"q":"x",}`}, "tool_calls/0/arguments", 9},
	{"missing required", validator.ToolCall{Name: "get_weather", Arguments: `{"unit":"celsius"}`}, "tool_calls/0/arguments", 17},
	{"bad enum", validator.ToolCall{Name: "get_weather", Arguments: `{"location":"Paris","unit":"kelvin"}`}, "tool_calls/0/arguments/unit", 27},
	{"extra property", validator.ToolCall{Name: "get_weather", Arguments: `{"location":"Paris","days":3}`}, "tool_calls/0/arguments/days", 20},
	{"wrong type", validator.ToolCall{Name: "search", Arguments: `{"q":"x","limit":"5"}`}, "tool_calls/0/arguments/limit", 17},
	{"out of range", validator.ToolCall{Name: "search", Arguments: `{"q":"x","limit":500}`}, "tool_calls/0/arguments/limit", 17},
	{"args array", validator.ToolCall{Name: "search", Arguments: `["x"]`}, "tool_calls/0/arguments", 0},
}

func newV(t testing.TB) *Validator {
	v, err := New(tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCheckToolCall(t *testing.T) {
	v := newV(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := v.CheckToolCall(c.call)
			if c.path == "" {
				if len(fs) != 0 {
					t.Fatalf("findings %+v, want none", fs)
				}
				return
			}
			if len(fs) == 0 {
				t.Fatalf("no finding, want one at %s", c.path)
			}
			f := fs[0]
			if f.Path != c.path || f.Start != c.at || f.Reason != validator.ReasonMalformedToolCall || f.Check != Name {
				t.Fatalf("finding %+v, want path %q start %d", f, c.path, c.at)
			}
		})
	}
}

func TestTextSettles(t *testing.T) {
	for _, text := range []string{"", "Let me look that up.", `{"not":"judged"`} {
		fs := validatortest.SplitIndependent(t, func() validator.Validator { return newV(t) }, text)
		if len(fs) != 0 {
			t.Fatalf("text findings %+v", fs)
		}
	}
}

func TestSpec(t *testing.T) {
	spec, ok := testRegistry.Lookup(Name)
	if !ok {
		t.Fatal("not registered")
	}
	cfg := spec.Config()
	dec := yaml.NewDecoder(strings.NewReader(spec.Example))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		t.Fatalf("Example: %v", err)
	}
	v, err := spec.New(cfg, &validator.Request{Tools: tools})
	if err != nil || v == nil {
		t.Fatalf("New: %v %v", v, err)
	}
	if _, ok := v.(validator.ToolCallChecker); !ok {
		t.Fatal("not a ToolCallChecker")
	}
	_, err = spec.New(cfg, &validator.Request{Tools: []validator.Tool{{Name: "bad", Parameters: []byte(`{"type":"obj"}`)}}})
	if err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("bad parameters error %v", err)
	}
	none, _ := spec.New(cfg, &validator.Request{})
	fs := none.(validator.ToolCallChecker).CheckToolCall(validator.ToolCall{Name: "x", Arguments: "{}"})
	if len(fs) != 1 || !strings.Contains(fs[0].Message, "no tools") {
		t.Fatalf("call without declared tools: %+v", fs)
	}
}

func FuzzToolCall(f *testing.F) {
	for _, c := range cases {
		f.Add(c.call.Name, c.call.Arguments)
	}
	for _, a := range []string{`{} {}`, `{}x`, `{"a":1`, `{"a":01}`, `[1,]`, `"s"`, `{"a":"\u12"}`, strings.Repeat("[", 200) + strings.Repeat("]", 200)} {
		f.Add("open", a)
	}
	v := newV(f)
	f.Fuzz(func(t *testing.T, name, args string) {
		fs := v.CheckToolCall(validator.ToolCall{Name: name, Arguments: args})
		for _, f := range fs {
			if f.Start < 0 || f.End < f.Start || f.End > len(args) && f.End > 2 {
				t.Fatalf("finding %+v out of range for %q", f, args)
			}
		}
		if _, known := v.tools[name]; !known && len(fs) == 0 {
			t.Fatalf("unknown function %q passed", name)
		}
		// A call that passes has arguments that are JSON, whichever
		// scanner read them.
		if len(fs) == 0 && len(bytes.TrimSpace([]byte(args))) > 0 && jsonsyntax.Check([]byte(args)) != nil {
			t.Fatalf("%q passed with arguments that are not JSON: %q", name, args)
		}
	})
}

func BenchmarkCheckToolCall(b *testing.B) {
	v := newV(b)
	call := validator.ToolCall{Name: "get_weather", Arguments: `{"location":"Paris, FR","unit":"celsius"}`}
	b.ReportAllocs()
	for b.Loop() {
		if fs := v.CheckToolCall(call); len(fs) != 0 {
			b.Fatal(fs)
		}
	}
}

// BenchmarkChunk16 is the per-chunk cost on the text stream, where the
// check only counts bytes.
func BenchmarkChunk16(b *testing.B) {
	v := newV(b)
	chunk := []byte("sixteen bytes ok")
	for b.Loop() {
		v.Write(chunk)
	}
}

// testRegistry holds the checks this package's tests look up.
var testRegistry = func() *validator.Registry {
	r := &validator.Registry{}
	Register(r)
	return r
}()
