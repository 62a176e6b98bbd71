package guard

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// decoderSpans is jsonSpans done with encoding/json's Decoder alone, token
// by token over the whole text: the reference the faster reading must
// match.
func decoderSpans(text string, emit func(string)) {
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	n := 0
	for n < maxSpans {
		tok, err := d.Token()
		if err != nil {
			return
		}
		s, ok := tok.(string)
		if !ok || strings.TrimSpace(s) == "" {
			continue
		}
		if t := strings.TrimSpace(s); len(t) > 1 && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
			decoderSpans(t, emit)
			continue
		}
		if strings.Contains(strings.TrimSpace(s), " ") {
			emit(s)
			n++
		}
	}
}

var jsonSpanTexts = []string{
	`{"title": "Some title here", "n": 3, "nested": {"body": "a body text", "list": ["x y", "z"]}}`,
	`{"esc": "line one\nline two \"quoted\" \u00e9t\u00e9 \ud83d\ude00 end", "key with spaces": 1}`,
	"{\"bad utf8\": \"a \xff b\"}",
	`{"inner": "{\"deep\": \"json in a string\"}", "arr": "[\"one two\"]"}`,
	"{\"a\": \"b c\"}\n{\"d\": \"e f\"}\n\n{\"g\": \"h i\"}\n",
	"{\"a\": \"b c\"}\n{\"d\": \"e f\"}\nnot json \"x y\"\n{\"g\": \"h i\"}",
	"{\"a\": \"b c\"}\n1 2 \"three four\"\n",
	"{\n  \"items\": [\n    {\"name\": \"a b\", \"text\": \"c d\"},\n    {\"name\": \"e f\", \"te",
	`[1, 2.5e3, true, null, "x y", {"": "  ", " ": "p q"}]`,
	"[1,,\n\"a b\", \"c d",
	"{\"k\"\n: \"v w\", \"x\": \"y z",
	"{\"a\": [\n  \"x y\",\n  \"z w\", 3, {\"q\": \"r s",
	"{\"a\": {\"b\": \n\"c d\", \"e\": \"f g\"}, \"h i\": [\"j k",
	"[\n{\"a\": \"b c\"},\n{\"d\": \"e f\"},\n{\"g\": \"h",
	"{\"a\": 1,\n\"b\": true\n, \"c\": \"d e\", \"f",
}

// TestJSONSpansMatchDecoder: jsonSpans emits what reading every token
// with the Decoder emits.
func TestJSONSpansMatchDecoder(t *testing.T) {
	for _, text := range jsonSpanTexts {
		var got, want []string
		jsonSpans(text, func(s string) { got = append(got, s) })
		decoderSpans(text, func(s string) { want = append(want, s) })
		if !slices.Equal(got, want) {
			t.Errorf("jsonSpans(%q) = %q, want %q", text, got, want)
		}
	}
}

func FuzzJSONSpans(f *testing.F) {
	for _, s := range jsonSpanTexts {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var got, want []string
		jsonSpans(text, func(s string) { got = append(got, s) })
		decoderSpans(text, func(s string) { want = append(want, s) })
		if !slices.Equal(got, want) {
			t.Fatalf("jsonSpans(%q) = %q, want %q", text, got, want)
		}
	})
}

// TestCutJSONState: the opening that puts a parser where a cut document's
// last line break leaves it.
func TestCutJSONState(t *testing.T) {
	for _, tc := range []struct {
		name, text, open string
		ok               bool
	}{
		{"array in object", "{\"a\": [\n  \"x y\",\n  \"z w", `{"":[0,`, true},
		{"after a closed element", "[\n{\"a\": \"b c\"},\n{\"g\"", `[0,`, true},
		{"key before colon (left to the Decoder)", "{\"k\"\n: \"v\"", "", false},
		{"value after colon (left to the Decoder)", "{\"k\":\n\"v", "", false},
		{"first key", "{\n\"k\": \"v", `{`, true},
		{"after a value", "{\"a\": 1\n, \"b\"", `{"":0`, true},
		{"two commas", "[1,,\n\"a b\"", "", false},
		{"top level", "{\"a\": 1}\n{\"b\"", "", false},
		{"no line break", "{\"a\": \"b", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open, cut, ok := cutJSONState(tc.text)
			if ok != tc.ok || open != tc.open {
				t.Fatalf("cutJSONState = %q, %d, %v; want %q, %v", open, cut, ok, tc.open, tc.ok)
			}
			if ok && tc.text[cut] != '\n' {
				t.Errorf("cut at %d, not a line break", cut)
			}
		})
	}
}
