package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/llamaserver"
	"github.com/aegis-sentinel/aegis/internal/sse"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// BenchmarkEventDialectsSideBySide is BenchmarkStreamSideBySide for the
// Messages and Responses routes, next to the chat route in the same run:
// llama-server's recorded streams of each (the first 40 events of
// testdata/wire and of llama-chat-200.sse, then their closing events;
// 250 µs per event) asked directly, through Aegis and through a plain
// httputil.ReverseProxy, interleaved, under
// the default policy and under one without the checks that hold back
// the last tokens (repetition, leak), which shows what the gateway and
// the dialect add (see sideBySide for what it reports).
func BenchmarkEventDialectsSideBySide(b *testing.B) {
	for _, tc := range []struct {
		path, capture, body string
		closing             int // the closing events kept after the first 40
	}{
		{"/v1/chat/completions", "llama-chat-200.sse", string(benchBody), 2},
		{"/v1/messages", "wire/llama-messages-200.sse", `{"model":"m","max_tokens":200,"system":"You tell short stories.","messages":[{"role":"user","content":"Tell me a story about a dog."}],"stream":true}`, 3},
		{"/v1/responses", "wire/llama-responses-200.sse", `{"model":"m","max_output_tokens":200,"instructions":"You tell short stories.","input":"Tell me a story about a dog.","stream":true}`, 4},
	} {
		raw, err := os.ReadFile("testdata/" + tc.capture)
		if err != nil {
			b.Fatal(err)
		}
		var evs [][]byte
		rd := sse.NewReader(bytes.NewReader(raw))
		for ev, err := rd.Next(); err == nil; ev, err = rd.Next() {
			evs = append(evs, appendNamed(nil, ev.Name, ev.Data))
		}
		evs = append(evs[:40:40], evs[len(evs)-tc.closing:]...)
		var arrived atomic.Int64
		up := replayNoting(b, evs, 250*time.Microsecond, &arrived)
		for _, pol := range policies(b) {
			b.Run(strings.TrimPrefix(tc.path, "/v1/")+"/"+pol.name, func(b *testing.B) {
				bus := &events.Bus{}
				sub := bus.Subscribe(1 << 14)
				defer sub.Close()
				aegis := start(b, &Gateway{Upstreams: []*upstream.Upstream{mustUpstream(b, "replay", up.URL, upstream.KindLlamaServer)}, Policy: pol.pol, Events: bus})
				sideBySide(b, up.URL, aegis.URL, tc.path, tc.body, &arrived, sub)
			})
		}
	}
}

// sideBySide asks the upstream at upURL directly, Aegis at aegisURL and a
// plain httputil.ReverseProxy for path, in a new order each round (whichever
// goes first after a finished stream meets a busier process), and reports
// the time to the first text delta of each, what Aegis and the proxy add
// to it, and, when arrived is set, how much of that is on the way in (how
// much later the upstream has the request). sub, when set, gets the
// gateway's events: their added TTFT is the gateway's own share.
func sideBySide(b *testing.B, upURL, aegisURL, path, body string, arrived *atomic.Int64, sub *events.Subscription) {
	proxy := reverseProxy(b, upURL)
	client := &http.Client{Transport: upstream.NewClient().Transport}
	defer client.CloseIdleConnections()
	urls := []string{upURL + path, aegisURL + path, proxy.URL + path}
	var ttft, reqs [3][]time.Duration
	order := rand.New(rand.NewPCG(1, 2))
	round := func() error {
		var texts [3]string
		for _, i := range order.Perm(3) {
			t0 := time.Now()
			d, text, err := firstDelta(client, urls[i], []byte(body))
			if err != nil {
				return err
			}
			ttft[i] = append(ttft[i], d)
			if arrived != nil {
				reqs[i] = append(reqs[i], time.Unix(0, arrived.Load()).Sub(t0))
			}
			texts[i] = text
		}
		if texts[0] == "" || texts[1] != texts[0] || texts[2] != texts[0] {
			return fmt.Errorf("text through Aegis %q, through the proxy %q, direct %q", texts[1], texts[2], texts[0])
		}
		return nil
	}
	for range 10 {
		if err := round(); err != nil {
			b.Fatal(err)
		}
	}
	ttft, reqs = [3][]time.Duration{}, [3][]time.Duration{}
	for sub != nil && len(sub.C) > 0 {
		<-sub.C
	}
	b.ResetTimer()
	for b.Loop() {
		if err := round(); err != nil {
			b.Fatal(err)
		}
	}
	added := make([]time.Duration, len(ttft[0]))
	proxyAdded := make([]time.Duration, len(ttft[0]))
	for i := range added {
		added[i] = ttft[1][i] - ttft[0][i]
		proxyAdded[i] = ttft[2][i] - ttft[0][i]
	}
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	b.ReportMetric(us(pct(ttft[0], .5)), "direct-ttft-p50-µs")
	b.ReportMetric(us(pct(added, .5)), "aegis-added-ttft-p50-µs")
	b.ReportMetric(us(pct(added, .99)), "aegis-added-ttft-p99-µs")
	// The same as the p50 through Aegis less the direct p50.
	b.ReportMetric(us(pct(ttft[1], .5)-pct(ttft[0], .5)), "aegis-p50-less-direct-p50-µs")
	// What any proxy adds: a plain httputil.ReverseProxy in the same
	// process.
	b.ReportMetric(us(pct(proxyAdded, .5)), "proxy-added-ttft-p50-µs")
	if arrived != nil {
		// Of that, the way in: how much later the upstream has the
		// request.
		addedReq := make([]time.Duration, len(reqs[0]))
		proxyReq := make([]time.Duration, len(reqs[0]))
		for i := range addedReq {
			addedReq[i] = reqs[1][i] - reqs[0][i]
			proxyReq[i] = reqs[2][i] - reqs[0][i]
		}
		b.ReportMetric(us(pct(addedReq, .5)), "aegis-added-request-p50-µs")
		b.ReportMetric(us(pct(proxyReq, .5)), "proxy-added-request-p50-µs")
	}
	if sub != nil {
		// The gateway's own share: from the first upstream text to the
		// first client text, as its finished events time them.
		var own []time.Duration
		for len(sub.C) > 0 {
			if e := <-sub.C; e.Kind == events.RequestFinished && e.AddedTTFT > 0 {
				own = append(own, e.AddedTTFT)
			}
		}
		b.ReportMetric(us(pct(own, .5)), "gateway-first-text-p50-µs")
	}
}

// BenchmarkEventDialectsLlamaServer is BenchmarkEventDialectsSideBySide
// against the testbed's real llama-server, a process of its own, for the
// chat, Messages and Responses routes (default policy, greedy sampling so
// every path gets the same text).
func BenchmarkEventDialectsLlamaServer(b *testing.B) {
	env := testbed.Require(b, "llama-cpu")
	const story = "Tell me a story about a dog."
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","max_tokens":32,"temperature":0,"top_k":1,"messages":[{"role":"system","content":"You tell short stories."},{"role":"user","content":"` + story + `"}],"stream":true}`},
		{"/v1/messages", `{"model":"m","max_tokens":32,"temperature":0,"top_k":1,"system":"You tell short stories.","messages":[{"role":"user","content":"` + story + `"}],"stream":true}`},
		{"/v1/responses", `{"model":"m","max_output_tokens":32,"temperature":0,"top_k":1,"instructions":"You tell short stories.","input":"` + story + `","stream":true}`},
	} {
		b.Run(strings.TrimPrefix(tc.path, "/v1/"), func(b *testing.B) {
			bus := &events.Bus{}
			sub := bus.Subscribe(1 << 14)
			defer sub.Close()
			aegis := start(b, &Gateway{Upstreams: []*upstream.Upstream{mustUpstream(b, "llama", env.LlamaCPUURL, upstream.KindLlamaServer)}, Events: bus})
			sideBySide(b, env.LlamaCPUURL, aegis.URL, tc.path, tc.body, nil, sub)
		})
	}
}

// firstDelta asks url for a named-event stream and returns the time to
// its first text delta and the whole text.
func firstDelta(c *http.Client, url string, body []byte) (time.Duration, string, error) {
	t0 := time.Now()
	// llama-server closes the connection after a streamed answer without
	// saying so: the next request on it dies unanswered. It is sent again,
	// as curl does and Aegis and the proxy do upstream, on the same clock.
	resp, err := llamaserver.Resend(context.Background(), 1, func(ctx context.Context) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		return c.Do(req)
	})
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, "", fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	var first time.Duration
	raw, err := io.ReadAll(readFirst(resp.Body, &first, t0))
	if err != nil {
		return 0, "", err
	}
	var c2 chunk
	text := ""
	rd := sse.NewReader(bytes.NewReader(raw))
	d := dialectChat
	switch {
	case bytes.Contains(raw, []byte("event: response.")):
		d = dialectResponses
	case bytes.Contains(raw, []byte("event: message_start")):
		d = dialectMessages
	}
	for ev, err := rd.Next(); err == nil; ev, err = rd.Next() {
		if d.parse(ev.Data, &c2) == nil && c2.hasText {
			text += string(c2.text)
		}
	}
	return first, text, nil
}

// readFirst reads r, noting in *first when a text delta first arrived.
func readFirst(r io.Reader, first *time.Duration, t0 time.Time) io.Reader {
	return &firstReader{r: r, first: first, t0: t0}
}

type firstReader struct {
	r     io.Reader
	first *time.Duration
	t0    time.Time
	seen  []byte
}

func (f *firstReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if *f.first == 0 && n > 0 {
		f.seen = append(f.seen, p[:n]...)
		if bytes.Contains(f.seen, []byte(`"text_delta"`)) || bytes.Contains(f.seen, []byte("response.output_text.delta\ndata:")) || bytes.Contains(f.seen, []byte(`"content":"`)) {
			*f.first = time.Since(f.t0)
			f.seen = nil
		}
	}
	return n, err
}

// BenchmarkEventParse is what each dialect spends on one upstream event of
// a recorded llama-server stream: parsing it and framing it again for the
// client (the work Aegis adds per event beside the checks).
func BenchmarkEventParse(b *testing.B) {
	for _, tc := range []struct {
		d       dialect
		capture string
	}{{dialectChat, "llama-chat-200.sse"}, {dialectMessages, "wire/llama-messages-200.sse"}, {dialectResponses, "wire/llama-responses-200.sse"}} {
		b.Run(strings.TrimPrefix(tc.d.String(), "/v1/"), func(b *testing.B) {
			raw, err := os.ReadFile("testdata/" + tc.capture)
			if err != nil {
				b.Fatal(err)
			}
			var evs [][]byte
			rd := sse.NewReader(bytes.NewReader(raw))
			for ev, err := rd.Next(); err == nil; ev, err = rd.Next() {
				if !ev.Done() {
					evs = append(evs, bytes.Clone(ev.Data))
				}
			}
			var out []byte
			var c chunk
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				c = chunk{} // one attempt reads the whole stream
				for _, p := range evs {
					if err := tc.d.parse(p, &c); err != nil {
						b.Fatal(err)
					}
					out = tc.d.frame(out[:0], p)
				}
				n += len(evs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
		})
	}
}
