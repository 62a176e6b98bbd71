package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/store"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// TestHiddenRetryKeepsMaxTokens: a loop is cut after some tokens were
// released; the hidden retry may generate only what is left of the
// client's max_tokens, and the usage the client reads counts the released
// tokens as completion, not as prompt.
func TestHiddenRetryKeepsMaxTokens(t *testing.T) {
	const first = "Once upon a time, a dog ran home."
	const loop = " the dog"
	const budget = 600
	for _, tc := range []struct {
		name   string
		stream bool
		key    string
	}{
		{"stream max_tokens", true, "max_tokens"},
		{"non-stream max_completion_tokens", false, "max_completion_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			var retryLimit atomic.Int64
			up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				var req map[string]json.RawMessage
				json.NewDecoder(r.Body).Decode(&req)
				w.Header().Set("Content-Type", "text/event-stream")
				if calls.Add(1) == 1 {
					evs := []string{chatChunk(first)}
					for range 40 {
						evs = append(evs, chatChunk(loop))
					}
					w.Write(sseBody(evs...))
					return
				}
				var n int64
				json.Unmarshal(req[tc.key], &n)
				retryLimit.Store(n)
				var msgs []json.RawMessage
				json.Unmarshal(req["messages"], &msgs)
				// The retry's prompt: the note, the user message and the prefill.
				prompt := 20 + len(msgs)
				w.Write(sseBody(chatChunk(" It"), chatChunk(" slept."),
					`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":`+
						itoa(prompt)+`,"completion_tokens":2,"total_tokens":`+itoa(prompt+2)+`}}`))
			})
			srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}})
			body := `{"messages":[{"role":"user","content":"story"}],"` + tc.key + `":` + itoa(budget) + `,"stream":` + map[bool]string{true: "true", false: "false"}[tc.stream] + `}`
			resp := post(t, srv.URL+"/v1/chat/completions", body)
			var content string
			var usage json.RawMessage
			if tc.stream {
				s := readStream(t, resp, false)
				content, usage = s.content, s.last["usage"]
			} else {
				var out struct {
					Choices []struct{ Message struct{ Content string } }
					Usage   json.RawMessage
				}
				json.Unmarshal(readAllBody(t, resp), &out)
				content, usage = out.Choices[0].Message.Content, out.Usage
			}
			if calls.Load() != 2 || !strings.HasPrefix(content, first) || !strings.HasSuffix(content, " It slept.") {
				t.Fatalf("calls %d content %q", calls.Load(), content)
			}
			prefix := strings.TrimSuffix(content, " It slept.")
			released := 1 + (len(prefix)-len(first)+len(loop)-1)/len(loop) // chunks the client got, a cut one included
			if got := retryLimit.Load(); got != int64(budget-released) {
				t.Errorf("the retry asked for %s %d; the client already had %d of %d tokens, want %d", tc.key, got, released, budget, budget-released)
			}
			var u struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
				Total      int `json:"total_tokens"`
			}
			if err := json.Unmarshal(usage, &u); err != nil {
				t.Fatalf("usage %s: %v", usage, err)
			}
			if u.Completion != released+2 || u.Prompt != 23-released || u.Total != u.Prompt+u.Completion {
				t.Errorf("usage %s: want completion_tokens %d (released %d + 2), prompt_tokens %d", usage, released+2, released, 23-released)
			}
		})
	}
}

// TestRetryIncidentHasTimings: the Retry event (what the incident log
// records for a hidden retry) carries the request's timings so far and the
// bytes held back, not zeros.
func TestRetryIncidentHasTimings(t *testing.T) {
	var calls atomic.Int32
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if calls.Add(1) == 1 {
			evs := []string{chatChunk("Once upon a time, a dog ran home.")}
			for range 40 {
				evs = append(evs, chatChunk(" the dog"))
			}
			w.Write(sseBody(evs...))
			return
		}
		w.Write(sseBody(chatChunk(" It slept."), finishChunk))
	})
	// A clock that moves 1 ms per reading: timings are positive on any machine.
	var tick atomic.Int64
	base := time.Unix(1000, 0)
	now := func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Millisecond) }
	bus := &events.Bus{}
	sub := bus.Subscribe(256)
	defer sub.Close()
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, Events: bus, Clock: steppingClock{now}})
	readStream(t, post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"story"}],"stream":true}`), false)
	var retry, finished *events.Event
	for len(sub.C) > 0 {
		e := <-sub.C
		switch e.Kind {
		case events.Retry:
			retry = &e
		case events.RequestFinished:
			finished = &e
		}
	}
	if retry == nil || finished == nil {
		t.Fatalf("retry %v finished %v", retry, finished)
	}
	if retry.Duration <= 0 || retry.TTFT <= 0 || retry.HeldBytes <= 0 {
		t.Fatalf("retry event without timings: duration %s ttft %s held %d bytes", retry.Duration, retry.TTFT, retry.HeldBytes)
	}
	if retry.HeldBytes > finished.HeldBytes || retry.Duration > finished.Duration {
		t.Fatalf("retry timings %+v beyond the request's %+v", retry, finished)
	}
	inc := store.IncidentFromEvent(*retry)
	if inc.Timings.Duration <= 0 || inc.Timings.HeldBytes != retry.HeldBytes {
		t.Fatalf("incident timings %+v", inc.Timings)
	}
}

// steppingClock reads the time from now; its timers are the wall clock's.
type steppingClock struct{ now func() time.Time }

func (c steppingClock) Now() time.Time                       { return c.now() }
func (c steppingClock) NewTimer(d time.Duration) clock.Timer { return clock.Real.NewTimer(d) }
