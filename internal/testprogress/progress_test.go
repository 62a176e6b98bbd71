package testprogress

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"go.uber.org/goleak"
)

func ev(action, pkg, test, output string, elapsed float64) []byte {
	b, _ := json.Marshal(event{Action: action, Package: pkg, Test: test, Output: output, Elapsed: elapsed})
	return b
}

// TestProgressEveryInterval: while packages run, a progress line says how
// long the run has taken, what is done and what is running (with its
// slowest test); a package's result line comes when it ends, a failing
// test's output is shown, and the summary names what failed.
func TestProgressEveryInterval(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var out strings.Builder
	p := New(&out, clk)
	p.Line(ev("start", "a/cli", "", "", 0))
	p.Line(ev("run", "a/cli", "TestServe", "", 0))
	p.Line(ev("start", "a/llm", "", "", 0))
	clk.Advance(10 * time.Second)
	p.Line(ev("run", "a/llm", "TestOllama", "", 0))
	p.Line(ev("output", "a/llm", "TestOllama", "=== RUN   TestOllama\n", 0))
	clk.Advance(20 * time.Second)
	p.Tick()
	p.Line(ev("pass", "a/cli", "TestServe", "", 29))
	p.Line(ev("output", "a/cli", "", "ok  \ta/cli\t30.0s\n", 0))
	p.Line(ev("pass", "a/cli", "", "", 30))
	p.Line(ev("output", "a/llm", "TestOllama", "    testbed_test.go:28: safety: context deadline exceeded\n", 0))
	p.Line(ev("output", "a/llm", "TestOllama", "--- FAIL: TestOllama (60.00s)\n", 0))
	p.Line(ev("fail", "a/llm", "TestOllama", "", 60))
	p.Line(ev("output", "a/llm", "", "FAIL\n", 0))
	p.Line(ev("fail", "a/llm", "", "", 61))
	p.Line([]byte("# a/broken"))
	p.Line(ev("output", "a/none", "", "?   \ta/none\t[no test files]\n", 0))
	p.Line(ev("skip", "a/none", "", "", 0))
	if p.Summary() {
		t.Fatal("summary says passed")
	}
	want := `... 30s: 0 packages done, 0 failed; running: a/cli (30s, TestServe 30s), a/llm (30s, TestOllama 20s)
ok  	a/cli	30.0s
    testbed_test.go:28: safety: context deadline exceeded
--- FAIL: TestOllama (60.00s)
=== RUN   TestOllama
`
	got := out.String()
	if !strings.HasPrefix(got, want[:strings.Index(want, "    testbed")]) {
		t.Fatalf("progress and result lines:\n%s", got)
	}
	for _, w := range []string{"=== RUN   TestOllama\n", "safety: context deadline exceeded", "FAIL\ta/llm\t61.0s\n", "# a/broken\n",
		"== go test: 1 of 2 packages FAILED in 30s: a/llm\n", "packages: 1 passed, 1 failed\n", "   failed: a/llm TestOllama\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "a/none") {
		t.Errorf("a package without tests is listed:\n%s", got)
	}
}

// TestRunTicksWhileSilent: Run writes progress lines on its interval
// while no event arrives, and ends with the summary when the stream ends.
func TestRunTicksWhileSilent(t *testing.T) {
	defer goleak.VerifyNone(t)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pr, pw := io.Pipe()
	out := &syncBuilder{ch: make(chan struct{}, 16)}
	done := make(chan bool)
	armed := clk.Armed()
	go func() { done <- Run(pr, out, clk, 20*time.Second) }()
	pw.Write(append(ev("start", "a/x", "", "", 0), '\n'))
	for i := 0; i < 3; i++ {
		<-armed
		armed = clk.Armed()
		clk.Advance(20 * time.Second)
		<-out.ch
	}
	pw.Write(append(ev("pass", "a/x", "", "", 61), '\n'))
	pw.Close()
	if !<-done {
		t.Fatal("Run says failed")
	}
	got := out.String()
	// Which of a line and a tick that arrive together comes first is
	// not fixed, so only the ticks and the end are checked here (the
	// progress line's content is TestProgressEveryInterval's).
	if n := strings.Count(got, "... "); n != 3 || !strings.Contains(got, "... 1m0s: 0 packages done, 0 failed") ||
		!strings.Contains(got, "== go test: 1 packages passed") {
		t.Fatalf("%d progress lines:\n%s", n, got)
	}
}

type syncBuilder struct {
	mu strings.Builder
	ch chan struct{}
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	n, err := s.mu.Write(p)
	if strings.HasPrefix(string(p), "... ") {
		s.ch <- struct{}{}
	}
	return n, err
}

func (s *syncBuilder) String() string { return s.mu.String() }

func FuzzLine(f *testing.F) {
	f.Add(string(ev("output", "a", "T", "x\n", 0)))
	f.Add(`{"Action":"fail","Package":"a"}`)
	f.Add("not json")
	f.Fuzz(func(t *testing.T, line string) {
		p := New(io.Discard, clock.NewFake(time.Unix(0, 0)))
		p.Line([]byte(line))
		p.Tick()
		p.Summary()
	})
}
