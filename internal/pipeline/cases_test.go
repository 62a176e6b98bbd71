package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"go.uber.org/goleak"
)

func TestCheckLinesShapes(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		verdicts  int
		malformed int
		firstErr  string
	}{
		{"empty", "", 0, 0, ""},
		{"blank lines", "\n\n  \n", 0, 0, ""},
		{"crlf", "{\"id\":\"a\",\"request\":{\"messages\":[]},\"output\":\"x\"}\r\n", 1, 0, ""},
		{"no trailing newline", `{"id":"a","request":{"messages":[]},"output":"x"}`, 1, 0, ""},
		{"numeric id", `{"id":7,"request":{"messages":[]},"output":"x"}`, 1, 0, ""},
		{"not json", "nope\n", 1, 1, "in:1: malformed case"},
		{"wrong type keeps id", `{"id":"k","request":{"messages":"x"},"output":"x"}` + "\n", 1, 1, "in:1:"},
		{"bad content", `{"id":"k","request":{"messages":[{"role":"user","content":42}]},"output":"x"}`, 1, 1, "content"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			st, err := CheckLines(policy.DefaultFor(&validator.Registry{}), strings.NewReader(tc.in), "in", &out, 1, 2)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if out.Len() == 0 {
				lines = nil
			}
			if len(lines) != tc.verdicts || st.Cases != tc.verdicts || st.Malformed != tc.malformed {
				t.Fatalf("%d lines, stats %+v", len(lines), st)
			}
			if tc.firstErr != "" {
				var v validator.Verdict
				json.Unmarshal([]byte(lines[0]), &v)
				if v.Verdict != validator.Fail || !strings.Contains(v.Error, tc.firstErr) {
					t.Errorf("verdict %+v, want error with %q", v, tc.firstErr)
				}
			}
		})
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.n++
	if w.n > 1 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

type failReader struct{ data *strings.Reader }

func (r failReader) Read(p []byte) (int, error) {
	n, err := r.data.Read(p)
	if err != nil {
		return n, errors.New("read failed")
	}
	return n, nil
}

// TestCheckLinesErrorsNoLeak: read and write errors come back as errors
// and leave no goroutine behind.
func TestCheckLinesErrorsNoLeak(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	data := string(benchCases(1000))
	p := policy.DefaultFor(&validator.Registry{})
	if _, err := CheckLines(p, strings.NewReader(data), "in", &failWriter{}, 1, 4); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("write error: %v", err)
	}
	if _, err := CheckLines(p, failReader{strings.NewReader(data[:5000])}, "in", &bytes.Buffer{}, 1, 4); err == nil || !strings.Contains(err.Error(), "in: read failed") {
		t.Errorf("read error: %v", err)
	}
	goleak.VerifyNone(t, leaks) // it retries while goroutines wind down
}

// FuzzCheckLines: any input gives one verdict line per non-blank input
// line, in order, and never panics.
func FuzzCheckLines(f *testing.F) {
	f.Add([]byte(`{"id":"a","request":{"messages":[{"role":"user","content":"hi"}]},"output":"x"}` + "\n"))
	f.Add([]byte("garbage\n\n{\"id\":1}\n"))
	f.Add(benchCases(3))
	p := policy.DefaultFor(&validator.Registry{})
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		st, err := CheckLines(p, bytes.NewReader(in), "f", &out, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, l := range bytes.Split(in, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				want++
			}
		}
		got := bytes.Count(out.Bytes(), []byte("\n"))
		if got != want || st.Cases != want {
			t.Fatalf("%d verdicts (stats %d) for %d lines", got, st.Cases, want)
		}
	})
}

type nopCheck struct{ n int }

func (c *nopCheck) Name() string                  { return "nop" }
func (c *nopCheck) Write(p []byte) (int, error)   { c.n += len(p); return len(p), nil }
func (c *nopCheck) Settled() int                  { return c.n }
func (c *nopCheck) Findings() []validator.Finding { return nil }
func (c *nopCheck) Close()                        {}

// BenchmarkPipelineOverhead is the pipeline's own cost per 16-byte chunk
// with eight checks that do nothing: Write, failure scan and release
// point. It must stay allocation-free.
func BenchmarkPipelineOverhead(b *testing.B) {
	var extra []validator.Validator
	checks := make([]nopCheck, 8)
	for i := range checks {
		extra = append(extra, &checks[i])
	}
	p := policy.DefaultFor(&validator.Registry{})
	a, err := New(withVals(p, extra...), &validator.Request{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	chunk := []byte("0123456789abcdef")
	b.ReportAllocs()
	for b.Loop() {
		a.Write(chunk)
		a.ReleasePoint()
	}
}
