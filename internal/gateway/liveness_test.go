package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// slotsReply is one /slots answer of a fake llama-server.
type slotsReply struct {
	status int
	body   string
	hang   bool // never answers (until the question is abandoned)
}

const (
	slotsBusy = `[{"id":0,"is_processing":true,"id_task":7,"n_prompt_tokens":9000,"n_prompt_tokens_processed":2048},{"id":1,"is_processing":false,"id_task":3}]`
	slotsIdle = `[{"id":0,"is_processing":false,"id_task":7},{"id":1,"is_processing":false,"id_task":3}]`
)

// prefillRun asks a fake llama-server that sends its first event only
// once the test says so and answers /slots with reply, through a gateway
// on a fake clock: it moves the clock by the probe interval steps times,
// each time after the gateway took the upstream's answer about its work,
// then lets the answer come. It returns the client's lines.
func prefillRun(t *testing.T, reply slotsReply, steps int, policyDoc string, maxWait time.Duration) string {
	t.Helper()
	noLeaks(t)
	first := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/slots" {
			if reply.hang {
				<-r.Context().Done()
				return
			}
			w.WriteHeader(reply.status)
			io.WriteString(w, reply.body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select { // the prompt is being processed
		case <-first:
		case <-r.Context().Done():
			return
		}
		for _, c := range []string{roleChunk, chatChunk("Once"), chatChunk(" upon a time."), finishChunk} {
			io.WriteString(w, "data: "+c+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	clk := clock.NewFake(lifeStart)
	loop := newLoopWatch()
	g := &Gateway{Upstreams: []*upstream.Upstream{mustUpstream(t, "llama", srv.URL, upstream.KindLlamaServer)}, Clock: clk,
		Policy: mustPolicy(t, policyDoc), waitHook: loop.hook, MaxPromptWait: maxWait}
	s := start(t, g)
	got := lines(t, s.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":true}`)
	waitFirst(t, loop)
	for i := 1; i <= steps; i++ {
		clk.Advance(DefaultWorkProbe)
		loop.until(t, fmt.Sprintf("%d answers about the upstream's work", i), func(s loopState) bool { return s.workAsked >= i || s.ended })
	}
	close(first)
	var out []string
	for l := range got {
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

const haltStalls = "checks: {repetition: false, leak: false}\nactions: {stall: {action: halt}}\n"

// TestPromptWorkKeepsWaiting: before its first event, an attempt asks
// llama-server's /slots whether it is working; while a slot processes a
// prompt, 45 s without an event is no stall (ttft is 30 s), and the
// answer arrives whole.
func TestPromptWorkKeepsWaiting(t *testing.T) {
	out := prefillRun(t, slotsReply{status: 200, body: slotsBusy}, 9, haltStalls, 0)
	if strings.Contains(out, "aegis_stall") || !strings.Contains(out, "Once") || !strings.Contains(out, " upon a time.") || !strings.HasSuffix(out, "[DONE]") {
		t.Fatalf("a prompt the upstream was processing was not waited for:\n%s", out)
	}
}

// TestPromptWorkStalls: an upstream that says it is not working on any
// prompt, or cannot say, gets the ttft stall, whose message says what it
// answered; the work it reports stops counting after MaxPromptWait.
func TestPromptWorkStalls(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   slotsReply
		steps   int
		maxWait time.Duration
		want    string
	}{
		{"no slot processing", slotsReply{status: 200, body: slotsIdle}, 5, 0, "none of its 2 slots processing"},
		{"garbage", slotsReply{status: 200, body: `{"slots":"busy"`}, 5, 0, "/slots: want a JSON array of slots"},
		{"not slots", slotsReply{status: 200, body: `[{"busy":true}]`}, 5, 0, "/slots: slot 0 has no"},
		{"slots off", slotsReply{status: 404, body: `{"error":{"code":404,"message":"This server does not support slots endpoint."}}`}, 1, 0, "--no-slots"},
		{"server error", slotsReply{status: 500, body: `oops`}, 5, 0, "GET /slots answered 500"},
		{"no answer", slotsReply{hang: true}, 1, 0, "context deadline exceeded"},
		{"bounded", slotsReply{status: 200, body: slotsBusy}, 4, 20 * time.Second, "the upstream still reported work after 20s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The answers take less than ttft's 30 s.
			out := prefillRunUntilStall(t, tc.reply, tc.steps, tc.maxWait)
			if !strings.Contains(out, "aegis_stall") || !strings.Contains(out, "ttft") || !strings.Contains(out, tc.want) {
				t.Fatalf("want a ttft stall saying %q:\n%s", tc.want, out)
			}
			if strings.Contains(out, "Once") {
				t.Fatalf("text after the stall:\n%s", out)
			}
		})
	}
}

// prefillRunUntilStall is prefillRun whose first event never comes: after
// the answers the clock moves past ttft.
func prefillRunUntilStall(t *testing.T, reply slotsReply, steps int, maxWait time.Duration) string {
	t.Helper()
	noLeaks(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/slots" {
			if reply.hang {
				<-r.Context().Done()
				return
			}
			w.WriteHeader(reply.status)
			io.WriteString(w, reply.body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	clk := clock.NewFake(lifeStart)
	loop := newLoopWatch()
	g := &Gateway{Upstreams: []*upstream.Upstream{mustUpstream(t, "llama", srv.URL, upstream.KindLlamaServer)}, Clock: clk,
		Policy: mustPolicy(t, haltStalls), waitHook: loop.hook, MaxPromptWait: maxWait}
	s := start(t, g)
	got := lines(t, s.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":true}`)
	waitFirst(t, loop)
	for i := 1; i <= steps; i++ {
		clk.Advance(DefaultWorkProbe)
		loop.until(t, fmt.Sprintf("%d answers about the upstream's work", i), func(s loopState) bool { return s.workAsked >= i })
	}
	clk.Advance(31 * time.Second) // past ttft from the last progress
	var out []string
	for l := range got {
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// TestTestbedSlots: the testbed's llama-server serves /slots by default,
// and its answer parses into slots.
func TestTestbedSlots(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	u := mustUpstream(t, "llama", env.LlamaCPUURL, upstream.KindLlamaServer)
	code, b, err := u.Get(t.Context(), "/slots")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /slots: %d %v", code, err)
	}
	slots, err := upstream.ParseSlots(b)
	if err != nil || len(slots) == 0 {
		t.Fatalf("slots %v: %v", slots, err)
	}
	w, err := u.Work(t.Context(), "")
	if err != nil || w.Detail == "" && !w.Working {
		t.Fatalf("work %+v: %v", w, err)
	}
}

// waitFirst waits until the attempt's loop first waits (its timers are
// armed).
func waitFirst(t *testing.T, loop *loopWatch) {
	t.Helper()
	for {
		waits, _, changed := loop.state()
		if waits > 0 {
			return
		}
		receive(t, changed, "a wait of the attempt's loop")
	}
}

// TestOllamaModelLoadedKeepsWaiting: Ollama reports nothing about a
// prompt in progress; while the request's model is loaded (GET /api/ps),
// 45 s without an event is no stall, and once it is not, ttft applies
// with what Ollama answered.
func TestOllamaModelLoadedKeepsWaiting(t *testing.T) {
	for _, tc := range []struct {
		name, ps string
		stall    bool
	}{
		{"loaded", `{"models":[{"name":"stories:latest","model":"stories:latest"}]}`, false},
		{"not loaded", `{"models":[]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			first := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if r.URL.Path == "/api/ps" {
					io.WriteString(w, tc.ps)
					return
				}
				w.Header().Set("Content-Type", "application/x-ndjson")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				select {
				case <-first:
				case <-r.Context().Done():
					return
				}
				io.WriteString(w, `{"model":"stories","created_at":"2026-11-28T18:00:00Z","message":{"role":"assistant","content":"Once upon a time."},"done":false}`+"\n")
				io.WriteString(w, `{"model":"stories","created_at":"2026-11-28T18:00:01Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true}`+"\n")
			}))
			t.Cleanup(srv.Close)
			clk := clock.NewFake(lifeStart)
			loop := newLoopWatch()
			g := &Gateway{Upstreams: []*upstream.Upstream{mustUpstream(t, "ollama", srv.URL, upstream.KindOllama)}, Clock: clk,
				Policy: mustPolicy(t, haltStalls), waitHook: loop.hook}
			s := start(t, g)
			got := lines(t, s.URL+"/api/chat", `{"model":"stories","messages":[{"role":"user","content":"x"}]}`)
			waitFirst(t, loop)
			for i := 1; i <= 5; i++ {
				clk.Advance(DefaultWorkProbe)
				loop.until(t, fmt.Sprintf("%d answers about the upstream's work", i), func(s loopState) bool { return s.workAsked >= i })
			}
			clk.Advance(20 * time.Second) // 45 s in all
			if !tc.stall {
				loop.until(t, "6 answers", func(s loopState) bool { return s.workAsked >= 6 })
				close(first)
			}
			var out []string
			for l := range got {
				out = append(out, l)
			}
			all := strings.Join(out, "\n")
			if tc.stall != strings.Contains(all, "aegis_stall") || tc.stall && !strings.Contains(all, `Ollama has no model \"stories\" loaded`) {
				t.Fatalf("stall %v wanted:\n%s", tc.stall, all)
			}
			if !tc.stall && !strings.Contains(all, "Once upon a time.") {
				t.Fatalf("the answer did not arrive:\n%s", all)
			}
		})
	}
}
