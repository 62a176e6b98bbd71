package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/policy"
)

// TestAppendChunkMatchesMaps: the chunks the gateway writes itself (a
// text split at the release point, the closing chunk) read byte for byte
// as encoding/json writes the same members from a map, as they did when
// they were built that way.
func TestAppendChunkMatchesMaps(t *testing.T) {
	tpls := map[string]template{
		"llama-server":             {id: "chatcmpl-1", model: "stories", created: 1795327087, fingerprint: "b1-Debian", createdAt: "2026-11-24T16:00:00Z"},
		"no fingerprint, odd text": {id: "<id>&", model: "m\u2028", created: -1, createdAt: "\x00"},
	}
	texts := []string{"", " Once", "a \"quoted\" <b>\n\ttab é 😀 \u2029 bad \xff"}
	routes := dialects
	for name, tpl := range tpls {
		for _, k := range routes {
			for _, text := range texts {
				got := normal(k, string(k.appendChunk([]byte("junk"), &tpl, []byte(text), "")[4:]))
				if want := canon(k, mapSynth(k, &tpl, text)); got != want {
					t.Errorf("%s %s synth(%q):\n got %s\nwant %s", name, k, text, got, want)
				}
			}
			for _, fr := range []string{"stop", "length"} {
				x := &exchange{route: k, tpl: tpl, cur: attemptState{finish: fr}}
				if got, want := normal(k, string(x.finalChunk())), canon(k, mapFinal(k, &tpl, fr)); got != want {
					t.Errorf("%s %s final(%q):\n got %s\nwant %s", name, k, fr, got, want)
				}
			}
		}
	}
}

// normal is a chunk of the named-event dialects with its members in the
// order a map spells them: those put "type" first, where the event's name
// is read without decoding.
func normal(k dialect, p string) string {
	if k != dialectMessages && k != dialectResponses {
		return p
	}
	if !strings.HasPrefix(p, `{"type":"`) {
		return "type not first: " + p
	}
	return canon(k, p)
}

// canon is p as a map spells it, for the named-event dialects.
func canon(k dialect, p string) string {
	if k != dialectMessages && k != dialectResponses {
		return p
	}
	var v any
	if json.Unmarshal([]byte(p), &v) != nil {
		return "not JSON: " + p
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func mapSynth(k dialect, t *template, text string) string {
	var v map[string]any
	switch k {
	case dialectChat, dialectCompletions:
		ch := map[string]any{"index": 0, "finish_reason": nil, "delta": map[string]any{"content": text}}
		v = map[string]any{"id": t.id, "object": "chat.completion.chunk", "created": t.created, "model": t.model, "choices": []any{ch}}
		if k == dialectCompletions {
			delete(ch, "delta")
			ch["text"] = text
			v["object"] = "text_completion"
		}
		if t.fingerprint != "" {
			v["system_fingerprint"] = t.fingerprint
		}
	case dialectOllamaChat:
		v = map[string]any{"model": t.model, "created_at": t.createdAt, "message": map[string]any{"role": "assistant", "content": text}, "done": false}
	case dialectMessages:
		v = map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": text}}
	case dialectResponses:
		v = map[string]any{"type": "response.output_text.delta", "delta": text}
	default:
		v = map[string]any{"model": t.model, "created_at": t.createdAt, "response": text, "done": false}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func mapFinal(k dialect, t *template, fr string) string {
	var v any
	switch k {
	case dialectChat:
		v = map[string]any{"id": t.id, "object": "chat.completion.chunk", "created": t.created, "model": t.model,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": fr}}}
	case dialectCompletions:
		v = map[string]any{"id": t.id, "object": "text_completion", "created": t.created, "model": t.model,
			"choices": []any{map[string]any{"index": 0, "text": "", "finish_reason": fr}}}
	case dialectOllamaChat:
		v = map[string]any{"model": t.model, "created_at": t.createdAt, "message": map[string]any{"role": "assistant", "content": ""}, "done": true, "done_reason": fr}
	case dialectMessages:
		v = map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stopOfFinish(fr), "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 0}}
	case dialectResponses:
		r := map[string]any{"object": "response", "status": "completed"}
		if fr == "length" {
			r["status"], r["incomplete_details"] = "incomplete", map[string]any{"reason": "max_output_tokens"}
		}
		v = map[string]any{"type": "response.completed", "response": r}
	default:
		v = map[string]any{"model": t.model, "created_at": t.createdAt, "response": "", "done": true, "done_reason": fr}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// discardWriter is a client that reads everything at once.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}

// SetWriteDeadline is there as on a real connection (an unsupported
// deadline costs an error value per write).
func (d *discardWriter) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkChunkPath is the gateway's work for one streamed chunk of the
// recorded llama-server answer: parse it, feed the checks, release what
// they cleared into the client's write buffer and write it. One op is one
// chunk; setting up each stream's exchange and checks is not timed.
func BenchmarkChunkPath(b *testing.B) {
	evs := recorded(b, "llama-chat-200.sse")
	payloads := make([][]byte, 0, len(evs))
	for _, ev := range evs {
		p := ev[len("data: ") : len(ev)-2]
		if string(p) != "[DONE]" {
			payloads = append(payloads, p)
		}
	}
	for _, pc := range []struct {
		name string
		pol  *policy.Policy
	}{{"default", nil}, {"no-holdback", mustPolicy(b, "checks: {repetition: false, leak: false}\n")}} {
		b.Run(pc.name, func(b *testing.B) {
			g := &Gateway{Policy: pc.pol}
			w := &discardWriter{h: http.Header{}}
			x := &exchange{g: g, w: w, route: dialectChat, req: request{stream: true}}
			if err := x.decode(benchBody); err != nil {
				b.Fatal(err)
			}
			x.bindReleaser()
			var chk Checker
			var c chunk
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j := i % len(payloads)
				if j == 0 {
					b.StopTimer()
					var err error
					if chk, err = g.newChecker(x.req.vreq); err != nil {
						b.Fatal(err)
					}
					x.out.text, x.out.sent, x.out.pending, x.cur, x.tpl = x.out.text[:0], 0, x.out.pending[:0], attemptState{}, template{}
					b.StartTimer()
				}
				p := payloads[j]
				if err := x.route.parse(p, &c); err != nil {
					b.Fatal(err)
				}
				x.tpl.learn(&c, 1)
				if !x.feed(chk, p, &c, now) {
					b.Fatalf("chunk %d failed the checks: %+v", j, chk.Verdict(1))
				}
			}
		})
	}
}

// TestChunkPathAllocs: once a stream is under way, a chunk of plain text
// is parsed, checked by the default checks, released and written without
// allocating.
func TestChunkPathAllocs(t *testing.T) {
	evs := recorded(t, "llama-chat-200.sse")
	x, chk := streamExchange(t, &Gateway{}, &discardWriter{h: http.Header{}})
	var c chunk
	now := time.Now()
	i := 0
	next := func() {
		ev := evs[i]
		i++
		p := ev[len("data: ") : len(ev)-2]
		if err := x.route.parse(p, &c); err != nil {
			t.Fatal(err)
		}
		x.tpl.learn(&c, 1)
		if !x.feed(chk, p, &c, now) {
			t.Fatalf("chunk %d failed the checks", i)
		}
	}
	for range 100 { // the stream under way: buffers have grown
		next()
	}
	if n := testing.AllocsPerRun(50, next); n != 0 {
		t.Errorf("%.1f allocations per plain-text chunk, want 0", n)
	}
}

// streamExchange is a streamed chat exchange of benchBody writing to w,
// with the checks of g's policy.
func streamExchange(t testing.TB, g *Gateway, w http.ResponseWriter) (*exchange, Checker) {
	t.Helper()
	x := &exchange{g: g, w: w, route: dialectChat, req: request{stream: true}}
	if err := x.decode(benchBody); err != nil {
		t.Fatal(err)
	}
	x.bindReleaser()
	chk, err := g.newChecker(x.req.vreq)
	if err != nil {
		t.Fatal(err)
	}
	return x, chk
}
