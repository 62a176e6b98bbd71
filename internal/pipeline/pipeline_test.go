package pipeline

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// wordCheck fails on the word "BAD" and holds back the unfinished last
// word (it may still become BAD).
type wordCheck struct {
	text     []byte
	settled  int
	findings []validator.Finding
	writes   int
	closed   bool
}

func (w *wordCheck) Name() string { return "word" }
func (w *wordCheck) Write(p []byte) (int, error) {
	w.writes++
	w.text = append(w.text, p...)
	w.scan(false)
	return len(p), nil
}
func (w *wordCheck) scan(final bool) {
	for {
		i := bytes.IndexByte(w.text[w.settled:], ' ')
		end := w.settled + i
		if i < 0 {
			if !final {
				return
			}
			end = len(w.text)
		}
		if string(w.text[w.settled:end]) == "BAD" && len(w.findings) == 0 {
			w.findings = append(w.findings, validator.Finding{Check: "word", Reason: validator.ReasonBannedContent, Start: w.settled, End: end})
		}
		if len(w.findings) > 0 {
			return
		}
		if i < 0 {
			w.settled = len(w.text)
			return
		}
		w.settled = end + 1
	}
}
func (w *wordCheck) Settled() int                  { return w.settled }
func (w *wordCheck) Findings() []validator.Finding { return w.findings }
func (w *wordCheck) Close()                        { w.closed = true; w.scan(true) }

// clockCheck fails when no text came for a second.
type clockCheck struct {
	last     time.Time
	n        int
	findings []validator.Finding
}

func (c *clockCheck) Name() string { return "clock" }
func (c *clockCheck) Write(p []byte) (int, error) {
	c.n += len(p)
	c.last = time.Time{}
	return len(p), nil
}
func (c *clockCheck) Settled() int                  { return c.n }
func (c *clockCheck) Findings() []validator.Finding { return c.findings }
func (c *clockCheck) Close()                        {}
func (c *clockCheck) Tick(now time.Time) {
	if c.last.IsZero() {
		c.last = now
		return
	}
	if now.Sub(c.last) > time.Second && c.findings == nil {
		c.findings = append(c.findings, validator.Finding{Check: "clock", Reason: validator.ReasonStall, Start: c.n, End: c.n})
	}
}
func (c *clockCheck) NextDeadline() time.Time {
	if c.last.IsZero() {
		return time.Time{}
	}
	return c.last.Add(time.Second + 1)
}

type toolCheck struct{}

func (toolCheck) Name() string                  { return "tools" }
func (toolCheck) Write(p []byte) (int, error)   { return len(p), nil }
func (toolCheck) Settled() int                  { return 1 << 30 }
func (toolCheck) Findings() []validator.Finding { return nil }
func (toolCheck) Close()                        {}
func (toolCheck) CheckToolCall(c validator.ToolCall) []validator.Finding {
	if c.Name == "known" {
		return nil
	}
	return []validator.Finding{{Check: "tools", Reason: validator.ReasonMalformedToolCall, Message: "unknown function " + c.Name}}
}

// note reports a guard_unavailable note, which the default policy releases.
type note struct{ toolCheck }

func (note) Findings() []validator.Finding {
	return []validator.Finding{{Check: "guard", Reason: validator.ReasonGuardUnavailable}}
}

func testPolicy(t *testing.T, doc string) (*policy.Policy, *validator.Registry) {
	t.Helper()
	reg := &validator.Registry{}
	reg.Register(validator.Spec{Name: "word", New: func(any, *validator.Request) (validator.Validator, error) { return &wordCheck{}, nil }})
	p, err := policy.Parse([]byte(doc), "test", reg)
	if err != nil {
		t.Fatal(err)
	}
	return p, reg
}

func TestReleasePoint(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		json    bool
		chunks  []string
		points  []int // after each chunk
		final   int   // after Close
		failed  bool
		verdict validator.Reason
	}{
		{"watermark holds the open word", "checks: {word: true}", false,
			[]string{"hello wo", "rld and", " more"}, []int{6, 12, 16}, 20, false, ""},
		{"watermark freezes at failure", "checks: {word: true}", false,
			[]string{"one two B", "AD three four"}, []int{8, 8}, 8, true, validator.ReasonBannedContent},
		{"buffer releases at close", "release: buffer\nchecks: {word: true}", false,
			[]string{"hello ", "world"}, []int{0, 0}, 11, false, ""},
		{"auto buffers json", "checks: {word: true}", true,
			[]string{`{"a": `, `1}`}, []int{0, 0}, 8, false, ""},
		{"auto watermarks text", "checks: {word: true}", false,
			[]string{`{"a": `, `1}`}, []int{6, 6}, 8, false, ""},
		{"buffer failure releases nothing", "release: buffer\nchecks: {word: true}", false,
			[]string{"a BAD ", "b"}, []int{0, 0}, 0, true, validator.ReasonBannedContent},
		{"optimistic releases at once", "release: optimistic\nchecks: {word: true}", false,
			[]string{"hello wo", "rld"}, []int{8, 11}, 11, false, ""},
		{"optimistic freezes before failing chunk", "release: optimistic\nchecks: {word: true}", false,
			[]string{"fine ", "BAD x", "y"}, []int{5, 5, 5}, 5, true, validator.ReasonBannedContent},
		{"no checks releases all", "checks: {word: false}", false,
			[]string{"abc", "def"}, []int{3, 6}, 6, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := testPolicy(t, tc.doc)
			req := &validator.Request{}
			if tc.json {
				req.ResponseFormat = &validator.ResponseFormat{Type: "json_object"}
			}
			a, err := New(p, req, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range tc.chunks {
				a.Write([]byte(c))
				if got := a.ReleasePoint(); got != tc.points[i] {
					t.Errorf("after chunk %d: release point %d, want %d", i, got, tc.points[i])
				}
			}
			a.Close()
			if got := a.ReleasePoint(); got != tc.final {
				t.Errorf("after close: release point %d, want %d", got, tc.final)
			}
			if a.Failed() != tc.failed {
				t.Errorf("failed = %v", a.Failed())
			}
			v := a.Verdict(1)
			if v.Reason != tc.verdict {
				t.Errorf("verdict reason %q, want %q", v.Reason, tc.verdict)
			}
			var all string
			for _, c := range tc.chunks {
				all += c
			}
			if a.Len() != len(all) {
				t.Errorf("fed %d bytes, want %d", a.Len(), len(all))
			}
		})
	}
}

func TestStopsFeedingAfterFailure(t *testing.T) {
	for _, complete := range []bool{false, true} {
		p, _ := testPolicy(t, "checks: {word: true}")
		w := &wordCheck{}
		a, err := New(withVals(p, w), &validator.Request{}, Options{Complete: complete})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{"BAD ", "x ", "y "} {
			a.Write([]byte(c))
		}
		a.Close()
		wantWrites, wantClosed := 1, false
		if complete {
			wantWrites, wantClosed = 3, true
		}
		if w.writes != wantWrites || w.closed != wantClosed {
			t.Errorf("complete=%v: %d writes, closed %v", complete, w.writes, w.closed)
		}
		if len(a.Findings()) != 2 { // the policy's word check and the extra one
			t.Errorf("findings = %v", a.Findings())
		}
	}
}

func TestTickerAndDeadline(t *testing.T) {
	p, _ := testPolicy(t, "checks: {word: false}")
	now := time.Unix(1000, 0)
	clk := &clockCheck{}
	a, err := New(withVals(p, clk), &validator.Request{}, Options{Clock: clock.NewFake(now)})
	if err != nil {
		t.Fatal(err)
	}
	if d := a.NextDeadline(); !d.Equal(now.Add(time.Second + 1)) {
		t.Fatalf("deadline %v", d)
	}
	a.Tick(now.Add(500 * time.Millisecond))
	if a.Failed() {
		t.Fatal("failed early")
	}
	a.Tick(now.Add(2 * time.Second))
	if !a.Failed() || a.Verdict(1).Reason != validator.ReasonStall {
		t.Fatalf("no stall: %+v", a.Verdict(1))
	}
	if !a.NextDeadline().IsZero() {
		t.Error("deadline after failure")
	}
}

func TestToolCallsAndNotes(t *testing.T) {
	p, _ := testPolicy(t, "checks: {word: false}")
	a, _ := New(withVals(p, toolCheck{}, note{}), &validator.Request{}, Options{})
	a.ToolCall(validator.ToolCall{Name: "known", Arguments: "{}"})
	a.Close()
	if a.Failed() || a.Verdict(1).Verdict != validator.Pass || len(a.Findings()) != 1 {
		t.Fatalf("known call + note: failed %v, %+v", a.Failed(), a.Verdict(1))
	}
	a, _ = New(withVals(p, toolCheck{}), &validator.Request{}, Options{})
	a.ToolCall(validator.ToolCall{Name: "rm_rf", Arguments: "{}"})
	if !a.Failed() || a.Verdict(1).Reason != validator.ReasonMalformedToolCall {
		t.Fatalf("unknown call: %+v", a.Verdict(1))
	}
}

// TestSplitIndependence feeds the same text whole, byte by byte and in
// pieces: verdict and final release point agree.
func TestSplitIndependence(t *testing.T) {
	texts := []string{"all good here", "one BAD apple", "BAD", "trailing BA", "x  y   BAD  "}
	for _, text := range texts {
		var ref validator.Verdict
		for split := 0; split < 4; split++ {
			p, _ := testPolicy(t, "checks: {word: true}")
			a, _ := New(p, &validator.Request{}, Options{})
			step := []int{len(text) + 1, 1, 2, 5}[split]
			for i := 0; i < len(text); i += step {
				a.Write([]byte(text[i:min(len(text), i+step)]))
			}
			a.Close()
			v := a.Verdict(1)
			if split == 0 {
				ref = v
				continue
			}
			if v.Verdict != ref.Verdict || v.Reason != ref.Reason || len(v.Findings) != len(ref.Findings) {
				t.Errorf("%q split %d: %+v vs %+v", text, step, v, ref)
			}
		}
	}
}

func TestModeAndChecks(t *testing.T) {
	p, _ := testPolicy(t, "release: optimistic\nchecks: {word: true}")
	a, _ := New(p, &validator.Request{}, Options{})
	if a.Mode() != policy.ModeOptimistic || len(a.Checks()) != 1 || a.Checks()[0] != "word" {
		t.Errorf("mode %v checks %v", a.Mode(), a.Checks())
	}
}

// withVals returns p with the validators vs among its checks: a test's
// checks enter through the policy, as a guard started at run time does
// (policy.With).
func withVals(p *policy.Policy, vs ...validator.Validator) *policy.Policy {
	for i, v := range vs {
		name := fmt.Sprintf("test_%d", i)
		p = p.With(policy.Check{Name: name, Spec: validator.Spec{Name: name,
			New: func(any, *validator.Request) (validator.Validator, error) { return v, nil }}})
	}
	return p
}
