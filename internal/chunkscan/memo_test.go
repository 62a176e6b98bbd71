package chunkscan

import (
	"strings"
	"testing"
)

// memoMatches scans the chunks in turn with one Memo and with Scan alone:
// the two must agree on every chunk, error or Fields.
func memoMatches(t *testing.T, f Format, chunks ...[]byte) (reused int) {
	t.Helper()
	var m Memo
	for i, p := range chunks {
		hit := m.ok && m.f == f
		var got, want Fields
		gotErr, wantErr := m.Scan(f, p, &got), Scan(f, p, &want)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("chunk %d %q: Memo error %v, Scan error %v", i, p, gotErr, wantErr)
		}
		if got != want {
			t.Fatalf("chunk %d %q:\nMemo %+v\nScan %+v", i, p, got, want)
		}
		if hit && m.ok && string(m.prev) != string(p) {
			reused++
			if !m.Reused() {
				t.Fatalf("chunk %d %q: read from the remembered chunk, Reused false", i, p)
			}
		} else if m.Reused() && string(m.prev) != string(p) {
			t.Fatalf("chunk %d %q: read in full, Reused true", i, p)
		}
	}
	return reused
}

func TestMemo(t *testing.T) {
	text := func(s string) []byte { return []byte(strings.Replace(llamaServerChunk, `" the"`, s, 1)) }
	for _, tc := range []struct {
		name   string
		f      Format
		chunks []string
		reused int // chunks read from the remembered one
	}{
		{name: "llama-server text chunks", f: Chat, reused: 3,
			chunks: []string{string(text(`" the"`)), string(text(`" dog"`)), string(text(`""`)), string(text(`"a \"long\" word\n\u00e9"`))}},
		{name: "the timestamp changes", f: Chat, reused: 0,
			chunks: []string{string(text(`" a"`)), strings.Replace(string(text(`" b"`)), "1795327087", "1795327088", 1)}},
		{name: "a longer text shifts the spans after it", f: Chat, reused: 1,
			chunks: []string{`{"choices":[{"delta":{"content":"a"},"finish_reason":"x"}],"id":"i","model":"m"}`,
				`{"choices":[{"delta":{"content":"abcdefghijklmnopq"},"finish_reason":"x"}],"id":"i","model":"m"}`}},
		{name: "spans before the text stay", f: Chat, reused: 1,
			chunks: []string{`{"id":"i","model":"m","choices":[{"delta":{"content":"abc"}}]}`, `{"id":"i","model":"m","choices":[{"delta":{"content":""}}]}`}},
		{name: "null text is read in full", f: Chat, reused: 0,
			chunks: []string{cases[1].in, strings.Replace(cases[1].in, `" Once"`, `null`, 1)}},
		{name: "a bad string in the text's place", f: Chat, reused: 0,
			chunks: []string{cases[1].in, strings.Replace(cases[1].in, `" Once"`, "\"a\x01\"", 1), strings.Replace(cases[1].in, `" Once"`, `"a\q"`, 1)}},
		{name: "the string ends early", f: Chat, reused: 0,
			chunks: []string{cases[1].in, strings.Replace(cases[1].in, `" Once"}`, `" Once"`, 1)}},
		{name: "a text made of the rest", f: Chat, reused: 0,
			chunks: []string{`{"choices":[{"delta":{"content":"a"}}]}`, `{"choices":[{"delta":{"content":"a"}}]}"}}]}`}},
		{name: "a cut chunk", f: Chat, reused: 0,
			chunks: []string{cases[1].in, cases[1].in[:40]}},
		{name: "completions chunks", f: Completions, reused: 1,
			chunks: []string{cases[16].in, strings.Replace(cases[16].in, `"text":"`, `"text":"more `, 1)}},
		{name: "ollama lines", f: Ollama, reused: 1,
			chunks: []string{cases[19].in, strings.Replace(cases[19].in, `"content":"`, `"content":"more `, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := make([][]byte, len(tc.chunks))
			for i, c := range tc.chunks {
				bs[i] = []byte(c)
			}
			if got := memoMatches(t, tc.f, bs...); got != tc.reused {
				t.Errorf("%d chunks read from the remembered one, want %d", got, tc.reused)
			}
		})
	}
}

// TestMemoFormat: a remembered chunk of one format is not reused for
// another.
func TestMemoFormat(t *testing.T) {
	var m Memo
	var a, b Fields
	p := []byte(`{"choices":[{"text":"x","delta":{"content":"y"}}]}`)
	if err := m.Scan(Chat, p, &a); err != nil {
		t.Fatal(err)
	}
	if err := m.Scan(Completions, p, &b); err != nil {
		t.Fatal(err)
	}
	if str(p, b.Text) != "x" {
		t.Errorf("completions text %q, want %q", str(p, b.Text), "x")
	}
}

// FuzzMemo: a chunk read after another through a Memo reads as Scan
// reads it alone.
func FuzzMemo(f *testing.F) {
	for _, tc := range cases {
		f.Add(uint8(tc.f), []byte(tc.in), []byte(strings.Replace(tc.in, `"`, `"z`, 7)))
	}
	f.Add(uint8(Chat), []byte(llamaServerChunk), []byte(strings.Replace(llamaServerChunk, `" the"`, `"\"\\"`, 1)))
	f.Fuzz(func(t *testing.T, format uint8, a, b []byte) {
		memoMatches(t, Format(format%3), a, b, a)
	})
}
