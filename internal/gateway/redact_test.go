package gateway

import (
	"strings"
	"testing"
	"unicode/utf8"
)

var redactCases = []struct {
	name, in, want string
}{
	{"no quotes", "too long: more than 50 words", "too long: more than 50 words"},
	{"deny rule and its match", `output matches deny rule "email": "bob@example.org"`, `output matches deny rule "[redacted]": "[redacted]"`},
	{"escaped quote inside", `upstream answered 500: "{\"error\":\"x\"}" then`, `upstream answered 500: "[redacted]" then`},
	{"single quotes", `invalid character 'x' looking for value`, `invalid character '[redacted]' looking for value`},
	{"apostrophe is not a quote", `the model's answer`, `the model's answer`},
	{"backquotes", "import of `os/exec`", "import of `[redacted]`"},
	{"unterminated", `upstream said "secret tail`, `upstream said "[redacted]`},
	{"empty", ``, ``},
}

func TestRedactQuotes(t *testing.T) {
	for _, c := range redactCases {
		t.Run(c.name, func(t *testing.T) {
			if got := RedactQuotes(c.in); got != c.want {
				t.Fatalf("RedactQuotes(%q) = %q; want %q", c.in, got, c.want)
			}
		})
	}
}

// FuzzRedactQuotes: whatever the message, no quoted content survives.
func FuzzRedactQuotes(f *testing.F) {
	for _, c := range redactCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := RedactQuotes(s)
		// Strip the placeholders; what is left must hold no quote pair
		// with content between them.
		rest := strings.ReplaceAll(out, Redacted, "")
		for _, q := range []string{`"`, "`"} {
			parts := strings.Split(rest, q)
			for i := 1; i < len(parts)-1; i += 2 {
				if parts[i] != "" {
					t.Fatalf("RedactQuotes(%q) = %q keeps quoted text %q", s, out, parts[i])
				}
			}
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("RedactQuotes(%q) = %q is not valid UTF-8", s, out)
		}
	})
}

var surrogateCases = []struct {
	name, in, want string
	changed        bool
}{
	{"none", `{"a":"b"}`, `{"a":"b"}`, false},
	{"pair kept", `"\ud83d\ude00"`, `"\ud83d\ude00"`, false},
	{"lone high", `"x\ud800y"`, `"x\ufffdy"`, true},
	{"lone low", `"\udc00"`, `"\ufffd"`, true},
	{"high then non-low", `"\ud800\u0041"`, `"\ufffd\u0041"`, true},
	{"high at the end", `"\uD800`, `"\ufffd`, true},
	{"escaped backslash", `"\\ud800"`, `"\\ud800"`, false},
	{"upper-case pair", `"\uD83D\uDE00"`, `"\uD83D\uDE00"`, false},
}

func TestReplaceLoneSurrogates(t *testing.T) {
	for _, c := range surrogateCases {
		t.Run(c.name, func(t *testing.T) {
			got, changed := replaceLoneSurrogates([]byte(c.in))
			if string(got) != c.want || changed != c.changed {
				t.Fatalf("replaceLoneSurrogates(%q) = %q, %v; want %q, %v", c.in, got, changed, c.want, c.changed)
			}
		})
	}
}

// FuzzReplaceLoneSurrogates: the output has the input's length, differs
// only where an escape became \ufffd, and running it again changes nothing.
func FuzzReplaceLoneSurrogates(f *testing.F) {
	for _, c := range surrogateCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, changed := replaceLoneSurrogates([]byte(s))
		if len(out) != len(s) || changed != (string(out) != s) {
			t.Fatalf("replaceLoneSurrogates(%q) = %q, %v", s, out, changed)
		}
		if again, ch := replaceLoneSurrogates(out); ch || string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, again)
		}
	})
}
