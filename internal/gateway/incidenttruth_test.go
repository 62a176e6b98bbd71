package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/store"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestIncidentActionIsWhatWasDone: a broken tool call (arguments with a
// trailing comma) is mended by asking the upstream again, not by the local
// fix; the retry's incident must say so, never fix_syntax.
func TestIncidentActionIsWhatWasDone(t *testing.T) {
	var calls atomic.Int32
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		args := `{"city":"Paris"}`
		if calls.Add(1) == 1 {
			args = `{"city":"Paris",}`
		}
		w.Write(sseBody(toolChunk(0, "call_1", "get_weather", ""), toolChunk(0, "", "", args[:5]), toolChunk(0, "", "", args[5:]), toolFinish))
	})
	bus := &events.Bus{}
	sub := bus.Subscribe(256)
	defer sub.Close()
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, Events: bus})
	readStream(t, post(t, srv.URL+"/v1/chat/completions", strings.Replace(toolsReq, "%s", "true", 1)), false)
	if calls.Load() != 2 {
		t.Fatalf("%d upstream calls, want 2 (a retry)", calls.Load())
	}
	var retries []store.Incident
	for len(sub.C) > 0 {
		if e := <-sub.C; e.Kind == events.Retry {
			retries = append(retries, store.IncidentFromEvent(e))
		}
	}
	if len(retries) != 1 {
		t.Fatalf("%d retry incidents, want 1", len(retries))
	}
	if a := retries[0].Action; a == validator.ActionFixSyntax || !a.IsRetry() {
		t.Fatalf("incident says %s (%s) for a call the upstream was asked again for", a, retries[0].Reason)
	}
}

// TestIncidentTimingsOfHeldStream: an answer held whole (JSON) that fails
// after many tokens: the retry's and the halt's incidents count the
// tokens the upstream streamed and the time to its first token, though
// the client received none.
func TestIncidentTimingsOfHeldStream(t *testing.T) {
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		evs := []string{chatChunk("Sure, here it is:")}
		for range 120 {
			evs = append(evs, chatChunk(" word"))
		}
		w.Write(sseBody(evs...)) // no closing chunk: no usage, no finish_reason
	})
	bus := &events.Bus{}
	sub := bus.Subscribe(1024)
	defer sub.Close()
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, Events: bus, Policy: requireJSON(t, "")})
	readAllBody(t, post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"JSON only"}],"stream":true}`))
	var incs []store.Incident
	for len(sub.C) > 0 {
		e := <-sub.C
		switch e.Kind {
		case events.Retry, events.Halt:
			incs = append(incs, store.IncidentFromEvent(e))
		}
	}
	if len(incs) == 0 {
		t.Fatal("no incidents")
	}
	for _, inc := range incs {
		if inc.Timings.Tokens == 0 || inc.Timings.TTFT <= 0 {
			t.Errorf("%s incident (attempt %d): %d tokens, ttft %s; want the upstream's tokens and first token", inc.Kind, inc.Attempt, inc.Timings.Tokens, inc.Timings.TTFT)
		}
	}
}

// TestRepairedUsageCachedWithinPrompt: after a repair that continued
// released text, the usage moves the carried tokens from prompt to
// completion; the prompt's cached tokens cannot stay above the prompt.
func TestRepairedUsageCachedWithinPrompt(t *testing.T) {
	const first = "Once upon a time, a dog ran home."
	var calls atomic.Int32
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if calls.Add(1) == 1 {
			evs := []string{chatChunk(first)}
			for range 40 {
				evs = append(evs, chatChunk(" the dog"))
			}
			w.Write(sseBody(evs...))
			return
		}
		// The retry's prompt holds the prefill, most of it cached.
		w.Write(sseBody(chatChunk(" It slept."),
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],`+
				`"usage":{"prompt_tokens":40,"completion_tokens":2,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":38}}}`))
	})
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}})
	s := readStream(t, post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"story"}],"stream":true}`), false)
	var u struct {
		Prompt  int `json:"prompt_tokens"`
		Details struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	if err := json.Unmarshal(s.last["usage"], &u); err != nil || calls.Load() != 2 {
		t.Fatalf("usage %s (%v), %d calls", s.last["usage"], err, calls.Load())
	}
	if u.Prompt >= 40 || u.Details.Cached > u.Prompt {
		t.Fatalf("usage %s: cached_tokens %d above prompt_tokens %d", s.last["usage"], u.Details.Cached, u.Prompt)
	}
}
