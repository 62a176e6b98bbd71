package toolcalls

import (
	"encoding/json"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"reflect"
	"strings"
	"testing"
)

func TestValues(t *testing.T) {
	cases := []struct {
		name, args string
		want       []Value
	}{
		{"flat", `{"to":"a@b.example","n":3,"body":"hi \"you\""}`, []Value{{Path: "to", Text: "a@b.example"}, {Path: "body", Text: `hi "you"`}}},
		{"nested", `{"a":{"b":["x",{"c":"y"}]},"d/e":"z"}`, []Value{{Path: "a/b/0", Text: "x"}, {Path: "a/b/1/c", Text: "y"}, {Path: "d~1e", Text: "z"}}},
		{"bare string", `"hello"`, []Value{{Path: "", Text: "hello"}}},
		{"cut off", `{"a":"one","b":"tw`, []Value{{Path: "a", Text: "one"}}},
		{"not json", `to=a@b`, nil},
		{"deep", strings.Repeat("[", 100) + `"x"` + strings.Repeat("]", 100), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Values(tc.args); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Values = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDerived(t *testing.T) {
	cases := []struct {
		name, text, how, want string
	}{
		{"url escapes", "pw%3DQuartz-Lynx-2291%26x", "url-decoded", "pw=Quartz-Lynx-2291&x"},
		{"query", "see https://x.example/a?d=hello+world&z=1", "query parameter d", "hello world"},
		{"markdown image", "![logo](https://x.example/i.png?s=c2VjcmV0LXZhbHVlLTE)", "base64 in query parameter s", "secret-value-1"},
		{"base64", "data: c2VjcmV0IHBhc3N3b3JkIGhlcmU=", "base64", "secret password here"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range Derived(tc.text) {
				if v.How == tc.how && v.Text == tc.want {
					return
				}
			}
			t.Errorf("Derived(%q) = %q, want %s %q", tc.text, Derived(tc.text), tc.how, tc.want)
		})
	}
	if d := Derived("an ordinary sentence with an identifier a1b2c3d4e5f6g7h8i9"); len(d) != 0 {
		t.Errorf("ordinary text derived %q", d)
	}
}

// FuzzValues: any arguments text, however broken, yields values without a
// panic, each a decoded string, and decodings stay bounded.
func FuzzValues(f *testing.F) {
	for _, s := range []string{`{"to":"a@b.example","body":"x"}`, `{"a":{"b":["x",{"c":"y"}]}}`, `"hello"`, `{"a":"one","b":"tw`, `[[[[`, `{"u":"https://x.example/?q=aGVsbG8gd29ybGQ%3D"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		for _, v := range Values(args) {
			if len(v.Path) > len(args)*2+8 {
				t.Fatalf("path %q longer than the arguments could name", v.Path)
			}
			if d := Derived(v.Text); len(d) > maxViews {
				t.Fatalf("%d decodings", len(d))
			}
		}
	})
}

// FuzzValuesReference holds Values to referenceValues (encoding/json's
// tokenizer) on any text: the same values at the same paths, broken input
// included.
func FuzzValuesReference(f *testing.F) {
	for _, s := range []string{`{"to":"a@b.example","body":"x\u00e9\ud83d\ude00"}`, `{"a":{"b":["x",{"c":"y"}]},"d/e~":"z"}`, `"hello" "again"`, `{"a":"one","b":"tw`,
		`[1, -2.5e3, true, null, "s"]`, `{"a":01}`, `{"bad":"\ud800x"}`, "{\"c\":\"\xff\xfe\"}", `{"a" "b"}`, `[1,]`, `1 2`, `1x`, `01`, ` {} `, ``, `"\u12"`, `{"a":1}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		got, want := Values(args), referenceValues(args)
		if Valid(args) != json.Valid([]byte(args)) {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", args, Valid(args), !Valid(args))
		}
		if len(got) != len(want) {
			t.Fatalf("Values(%q) = %q, reference %q", args, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("Values(%q)[%d] = %q, reference %q", args, i, got[i], want[i])
			}
		}
	})
}

// TestOf: a call read once carries its reading to every check; a reading
// of other arguments (the call was changed after it) is not used.
func TestOf(t *testing.T) {
	args := `{"to":"a@b.example"}`
	r := Read(args)
	call := validator.ToolCall{Name: "send", Arguments: args, Read: r}
	if Of(call) != r {
		t.Fatal("the call's reading was not used")
	}
	call.Arguments = `{"to":"c@d.example"}`
	if got := Of(call); got == r || len(got.Values) != 1 || got.Values[0].Text != "c@d.example" || !got.Valid {
		t.Fatalf("stale reading: %+v", got)
	}
	if got := Of(validator.ToolCall{Arguments: `{"a":"x"`}); got.Valid || len(got.Values) != 1 {
		t.Fatalf("unread call: %+v", got)
	}
}
