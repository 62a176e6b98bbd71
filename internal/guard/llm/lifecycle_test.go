package llm

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// gatedLlama parks every prefill and first-step verdict request until the
// test answers it; the second step of a fail verdict is answered at once.
type gatedLlama struct {
	reqs chan *gatedReq
}

type gatedReq struct {
	prompt  string
	prefill bool
	answer  chan string // "pass", "fail" or "" (a prefill's end)
}

func (f *gatedLlama) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	_ = json.NewDecoder(r.Body).Decode(&req)
	prompt, _ := req["prompt"].(string)
	if _, ok := req["n_probs"]; !ok && req["n_predict"] != float64(0) {
		json.NewEncoder(w).Encode(map[string]any{"content": `","risk":"medium","reason":"unsafe_content","action":"halt"}`})
		return
	}
	g := &gatedReq{prompt: prompt, prefill: req["n_predict"] == float64(0), answer: make(chan string, 1)}
	f.reqs <- g
	var content string
	select {
	case content = <-g.answer:
	case <-r.Context().Done():
		return
	}
	top := []tokenProb{{Token: "pass", Logprob: math.Log(0.9)}, {Token: "fail", Logprob: math.Log(0.1)}}
	json.NewEncoder(w).Encode(map[string]any{"content": content, "completion_probabilities": []any{map[string]any{
		"token": content, "logprob": math.Log(0.9), "top_logprobs": top}}})
}

func gatedGuard(t *testing.T, cfg Config) (*Guard, *gatedLlama, chan struct{}) {
	t.Helper()
	f := &gatedLlama{reqs: make(chan *gatedReq, 16)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg.URL, cfg.Protocol = srv.URL, "verdict-json"
	g, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	woke := make(chan struct{}, 16)
	g.Notify(func() { woke <- struct{}{} })
	t.Cleanup(g.Stop)
	return g, f, woke
}

func recv[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(30 * time.Second): // a hang, not a timing assertion
		t.Fatal("nothing arrived")
		panic("unreachable")
	}
}

// TestLateFailJoins: the guard's verdict on the tail, asked after the
// last token, is awaited (Done stays false) and its "fail" is a finding,
// with warm prefill on and off.
func TestLateFailJoins(t *testing.T) {
	t0 := time.Unix(5000, 0)
	for _, prefill := range []bool{false, true} {
		g, f, woke := gatedGuard(t, Config{CadenceTokens: 2, Deadline: 2 * time.Second, PrefillOnly: prefill})
		g.Tick(t0)
		g.Write([]byte("a calm sentence."))
		first := recv(t, f.reqs)
		if first.prefill != prefill {
			t.Fatalf("prefill=%v: first call prefill=%v", prefill, first.prefill)
		}
		g.Write([]byte(" and the tail"))
		g.Close()
		first.answer <- map[bool]string{false: "pass", true: ""}[prefill]
		recv(t, woke)
		final := recv(t, f.reqs)
		if final.prefill || !strings.Contains(final.prompt, "and the tail") {
			t.Fatalf("prefill=%v: the final call is not a verdict on the whole text: %+v", prefill, final)
		}
		if g.Done() {
			t.Fatal("done before the final verdict")
		}
		final.answer <- "fail"
		recv(t, woke)
		if !g.Done() || len(g.Findings()) != 1 || g.Findings()[0].Reason != validator.ReasonUnsafeContent {
			t.Fatalf("prefill=%v: done %v findings %+v", prefill, g.Done(), g.Findings())
		}
	}
}

// TestFinalDeadlineFromClose: after the last token the guard waits at
// most its deadline, however long the call in flight at that moment
// already took.
func TestFinalDeadlineFromClose(t *testing.T) {
	t0 := time.Unix(5000, 0)
	g, f, _ := gatedGuard(t, Config{CadenceTokens: 2, Deadline: 2 * time.Second, FailOpen: true})
	g.Tick(t0)
	g.Write([]byte("a first sentence."))
	recv(t, f.reqs) // never answered
	end := t0.Add(1500 * time.Millisecond)
	g.Tick(end)
	g.Write([]byte(" more"))
	g.Close()
	if d := g.NextDeadline(); !d.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("deadline of the call in flight %v", d)
	}
	g.Tick(t0.Add(2 * time.Second)) // fail open: released; the final call starts
	recv(t, f.reqs)
	if d := g.NextDeadline(); !d.Equal(end.Add(2 * time.Second)) {
		t.Fatalf("final call's deadline %v, want the end + 2s", d)
	}
	g.Tick(end.Add(2 * time.Second))
	if !g.Done() || g.Settled() != len("a first sentence. more") {
		t.Fatalf("done %v settled %d", g.Done(), g.Settled())
	}
}

// TestCoalesce: text that arrives while the guard is busy waits, and the
// next call, started as soon as the busy one answers, covers all of it.
func TestCoalesce(t *testing.T) {
	g, f, woke := gatedGuard(t, Config{CadenceTokens: 1, Deadline: time.Minute})
	g.Tick(time.Unix(5000, 0))
	g.Write([]byte("one. "))
	first := recv(t, f.reqs)
	for _, w := range []string{"two. ", "three. ", "four. "} {
		g.Write([]byte(w))
	}
	select {
	case r := <-f.reqs:
		t.Fatalf("a second call while the first is in flight: %q", r.prompt)
	default:
	}
	g.Tick(time.Unix(5001, 0)) // the next verdict is due when the first answers
	first.answer <- "pass"
	recv(t, woke)
	next := recv(t, f.reqs)
	if !strings.Contains(next.prompt, "four. ") {
		t.Fatalf("the next call does not cover the waiting text: %q", next.prompt)
	}
	next.answer <- "pass"
	recv(t, woke)
	if g.Settled() != len("one. two. three. four. ") {
		t.Fatalf("settled %d", g.Settled())
	}
}

// TestGuardKilled: a guard server that dies with a call in flight gives
// guard_unavailable at once (fail closed), not at the deadline, and wakes
// the pipeline.
func TestGuardKilled(t *testing.T) {
	f := &gatedLlama{reqs: make(chan *gatedReq, 16)}
	srv := httptest.NewServer(f)
	g, err := New(Config{URL: srv.URL, Protocol: "verdict-json", CadenceTokens: 2, Deadline: time.Hour}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	woke := make(chan struct{}, 4)
	g.Notify(func() { woke <- struct{}{} })
	g.Tick(time.Unix(5000, 0))
	g.Write([]byte("a sentence."))
	recv(t, f.reqs)
	g.Close()
	srv.CloseClientConnections() // the guard process is gone
	srv.Close()
	recv(t, woke)
	if fs := g.Findings(); !g.Done() || len(fs) != 1 || fs[0].Reason != validator.ReasonGuardUnavailable {
		t.Fatalf("done %v findings %+v", g.Done(), fs)
	}
}
