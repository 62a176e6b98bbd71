package guardnats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aegis-sentinel/aegis/internal/fleet"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// countJudge answers pass (or fail for text "bad") and counts its calls.
type countJudge struct{ n atomic.Int64 }

func (c *countJudge) Judge(_ context.Context, j llm.Judgement) (*llm.Result, error) {
	c.n.Add(1)
	if j.Prefill {
		return nil, nil
	}
	v := &validator.Verdict{Verdict: validator.Pass, Risk: validator.RiskLow, Action: validator.ActionRelease}
	if j.Text == "bad" {
		v = &validator.Verdict{Verdict: validator.Fail, Risk: validator.RiskHigh, Reason: validator.ReasonUnsafeContent, Action: validator.ActionHalt}
	}
	return &llm.Result{Verdict: v, PFail: 0.25, HasProbs: true, PromptTokens: 12}, nil
}

// conn dials nats with channels that report disconnects and reconnects.
func conn(t *testing.T, url string) (nc *nats.Conn, down, up chan struct{}) {
	t.Helper()
	down, up = make(chan struct{}, 8), make(chan struct{}, 8)
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { down <- struct{}{} }),
		nats.ReconnectHandler(func(*nats.Conn) { up <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, down, up
}

type runningWorker struct {
	w    *Worker
	j    *countJudge
	stop func()
}

func startWorker(t *testing.T, url, id string) *runningWorker {
	t.Helper()
	nc, _, _ := conn(t, url)
	j := &countJudge{}
	w := &Worker{NC: nc, ID: id, Model: "stories", Device: func() string { return "CPU" }, Judge: j, Log: quiet}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done; nc.Flush() }) }
	t.Cleanup(stop)
	// Serving once the fleet knows it.
	for {
		ms, err := fleet.RollCall(context.Background(), nc, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.ID == id {
				return &runningWorker{w, j, stop}
			}
		}
	}
}

func judge(t *testing.T, s *Session, text string) *llm.Result {
	t.Helper()
	// A bound on a hang, far past a loaded machine's round trip.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.Judge(ctx, llm.Judgement{Task: "safety", Protocol: "verdict-json", Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRoundTripAndVerdicts(t *testing.T) {
	n := testbed.StartNATS(t)
	startWorker(t, n.URL, "w1")
	nc, _, _ := conn(t, n.URL)
	s := NewSession(nc, "stories", nil)
	for _, tc := range []struct {
		name, text string
		want       validator.Outcome
	}{
		{"pass", "fine", validator.Pass},
		{"fail", "bad", validator.Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := judge(t, s, tc.text)
			if res.Verdict.Verdict != tc.want || !res.HasProbs || res.PFail != 0.25 || res.PromptTokens != 12 {
				t.Errorf("result %+v verdict %+v", res, res.Verdict)
			}
		})
	}
	if s.Worker() != "w1" {
		t.Errorf("session sticks to %q, want w1", s.Worker())
	}
	// A model nobody serves: an error at once, not a wait for the deadline.
	other := NewSession(nc, "nobody", nil)
	if _, err := other.Judge(context.Background(), llm.Judgement{Text: "x"}); err == nil {
		t.Error("no error for a model without workers")
	}
}

// TestStickyWorkerMovesWhenItDies: the calls of one response stay on one
// worker while it lives, and move to another when it stops.
func TestStickyWorkerMovesWhenItDies(t *testing.T) {
	n := testbed.StartNATS(t)
	ws := map[string]*runningWorker{"a": startWorker(t, n.URL, "a"), "b": startWorker(t, n.URL, "b")}
	nc, _, _ := conn(t, n.URL)
	s := NewSession(nc, "stories", nil)
	judge(t, s, "first")
	first := s.Worker()
	if ws[first] == nil {
		t.Fatalf("stuck to %q", first)
	}
	for range 20 {
		judge(t, s, "more")
		if s.Worker() != first {
			t.Fatalf("moved from %s to %s while it lived", first, s.Worker())
		}
	}
	if got := ws[first].j.n.Load(); got != 21 {
		t.Fatalf("worker %s judged %d calls, want all 21", first, got)
	}
	ws[first].stop()
	judge(t, s, "after")
	if s.Worker() == first || s.Worker() == "" {
		t.Fatalf("still on %q after it stopped", s.Worker())
	}
}

// TestNATSDown: with NATS stopped, calls go to the fallback judge, or fail
// at once without one; when NATS is back, they reach the workers again.
func TestNATSDown(t *testing.T) {
	n := testbed.StartNATS(t)
	w := startWorker(t, n.URL, "w")
	nc, down, up := conn(t, n.URL)
	local := &countJudge{}
	withFallback := NewSession(nc, "stories", local)
	without := NewSession(nc, "stories", nil)
	judge(t, withFallback, "warm")
	n.Stop()
	<-down
	judge(t, withFallback, "while down")
	if local.n.Load() != 1 {
		t.Fatalf("fallback judged %d calls, want 1", local.n.Load())
	}
	if _, err := without.Judge(context.Background(), llm.Judgement{Text: "x"}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("without fallback: %v, want ErrUnreachable", err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	<-up
	before := w.j.n.Load()
	// The worker reconnects by itself too; a call may meet the gap.
	for w.j.n.Load() == before {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		without.Judge(ctx, llm.Judgement{Text: "back"})
		cancel()
	}
}

// heldJudge answers pass only once release is closed, and says on
// started when a call has begun.
type heldJudge struct {
	started chan struct{}
	release chan struct{}
}

func (h *heldJudge) Judge(ctx context.Context, j llm.Judgement) (*llm.Result, error) {
	h.started <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &llm.Result{Verdict: &validator.Verdict{Verdict: validator.Pass, Risk: validator.RiskLow, Action: validator.ActionRelease}}, nil
}

// TestConnectionLostWhileWaiting: a call waiting for its reply when the
// connection drops turns to the fallback judge (or fails) at that moment,
// not at its deadline: a reply sent while the asking connection is away
// never reaches it.
func TestConnectionLostWhileWaiting(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fallback bool
	}{
		{"fallback judges", true},
		{"no fallback fails at once", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testbed.StartNATS(t)
			h := &heldJudge{started: make(chan struct{}, 1), release: make(chan struct{})}
			defer close(h.release)
			wnc, _, _ := conn(t, n.URL)
			w := &Worker{NC: wnc, ID: "held", Model: "held", Judge: h, Log: quiet}
			wctx, wcancel := context.WithCancel(context.Background())
			wdone := make(chan struct{})
			go func() { defer close(wdone); w.Run(wctx) }()
			defer func() { wcancel(); <-wdone }()
			nc, _, _ := conn(t, n.URL)
			for serving := false; !serving; {
				ms, err := fleet.RollCall(context.Background(), nc, 200*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range ms {
					serving = serving || m.ID == "held"
				}
			}
			local := &countJudge{}
			var s *Session
			if tc.fallback {
				s = NewSession(nc, "held", local)
			} else {
				s = NewSession(nc, "held", nil)
			}
			type answer struct {
				res *llm.Result
				err error
			}
			got := make(chan answer, 1)
			// The deadline is far beyond the test's own timeout: only
			// the dropped connection can end the call in time.
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			go func() {
				res, err := s.Judge(ctx, llm.Judgement{Task: "safety", Protocol: "verdict-json", Text: "bad"})
				got <- answer{res, err}
			}()
			<-h.started
			n.Stop()
			a := <-got
			switch {
			case tc.fallback && (a.err != nil || a.res == nil || a.res.Verdict.Verdict != validator.Fail || local.n.Load() != 1):
				t.Fatalf("got %+v, %v after %d fallback calls; want the fallback's fail", a.res, a.err, local.n.Load())
			case !tc.fallback && !errors.Is(a.err, ErrUnreachable):
				t.Fatalf("got %+v, %v; want ErrUnreachable", a.res, a.err)
			}
			if s.Worker() != "" {
				t.Errorf("the session still sticks to %q", s.Worker())
			}
		})
	}
}

func TestWorkerAnnouncesMeasurements(t *testing.T) {
	n := testbed.StartNATS(t)
	w := startWorker(t, n.URL, "w")
	nc, _, _ := conn(t, n.URL)
	s := NewSession(nc, "stories", nil)
	for range 5 {
		judge(t, s, "x")
	}
	ms, err := fleet.RollCall(context.Background(), nc, 300*time.Millisecond)
	if err != nil || len(ms) != 1 {
		t.Fatalf("roll call %v, %v", ms, err)
	}
	m := ms[0]
	if m.Role != fleet.RoleGuardWorker || m.Model != "stories" || m.Device != "CPU" || m.Calls != 5 ||
		m.VerdictP50 <= 0 || m.Subject != Subject("stories") {
		t.Errorf("member %+v", m)
	}
	_ = w
}

// TestGuardValidatorOverNATS runs the guard_llm check with nats set: a
// worker's fail verdict becomes the check's finding even with fail_open,
// so the gateway never releases text a live worker judged unsafe.
func TestGuardValidatorOverNATS(t *testing.T) {
	n := testbed.StartNATS(t)
	startWorker(t, n.URL, "w")
	Register(quiet)
	for _, tc := range []struct {
		name, text string
		want       validator.Reason
	}{
		{"judged fail", "bad", validator.ReasonUnsafeContent},
		{"judged pass", "fine", validator.ReasonNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := llm.New(llm.Config{NATS: n.URL, Model: "stories", Protocol: "verdict-json", FailOpen: true, Deadline: 30 * time.Second}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			g.Write([]byte(tc.text))
			g.Close()
			g.Wait() // the final call has returned
			if !g.Done() {
				t.Fatal("no final verdict after the call returned")
			}
			var got validator.Reason
			for _, f := range g.Findings() {
				got = f.Reason
			}
			if got != tc.want || (tc.want == validator.ReasonNone && g.Settled() != len(tc.text)) {
				t.Errorf("finding %q, settled %d; want %q", got, g.Settled(), tc.want)
			}
		})
	}
}

// TestWorkerLogsVerdicts: with LogVerdicts, a worker logs each verdict it
// sent with the response named in the call (request id, attempt, the
// length of the text), never the text; prefills are not verdicts.
func TestWorkerLogsVerdicts(t *testing.T) {
	n := testbed.StartNATS(t)
	var buf bytes.Buffer // read once Run has returned, after every write
	wnc, _, _ := conn(t, n.URL)
	w := &Worker{NC: wnc, ID: "logger", Model: "logged", Judge: &countJudge{}, LogVerdicts: true,
		Log: slog.New(slog.NewJSONHandler(&buf, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	nc, _, _ := conn(t, n.URL)
	for serving := false; !serving; { // serving once the fleet knows it
		ms, err := fleet.RollCall(context.Background(), nc, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			serving = serving || m.ID == "logger"
		}
	}
	s := NewSession(nc, "logged", nil)
	for _, j := range []llm.Judgement{
		{Text: "bad", RequestID: "req-1", Attempt: 2},
		{Text: "fine text", RequestID: "req-2", Attempt: 1},
		{Text: "warm", RequestID: "req-2", Attempt: 1, Prefill: true},
	} {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Minute) // a hang, not a speed
		_, err := s.Judge(rctx, j)
		rcancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	<-done
	var got []string
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		var e struct {
			Msg       string  `json:"msg"`
			RequestID string  `json:"request_id"`
			Verdict   string  `json:"verdict"`
			Attempt   int     `json:"attempt"`
			Bytes     int     `json:"bytes"`
			Delivered bool    `json:"delivered"`
			Text      *string `json:"text"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if e.Msg != "guard worker verdict" {
			continue
		}
		if e.Text != nil || strings.Contains(line, "fine text") {
			t.Errorf("the log carries the text: %s", line)
		}
		got = append(got, fmt.Sprintf("%s/%d %d %s %v", e.RequestID, e.Attempt, e.Bytes, e.Verdict, e.Delivered))
	}
	// A worker logs after it replies, so two verdicts' lines may come in
	// either order.
	slices.Sort(got)
	want := []string{"req-1/2 3 fail true", "req-2/1 9 pass true"}
	if !slices.Equal(got, want) {
		t.Errorf("logged %q, want %q", got, want)
	}
}
