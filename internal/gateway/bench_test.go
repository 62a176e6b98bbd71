package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/llamaserver"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/sse"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// recorded loads the events of a recorded llama-server stream.
func recorded(tb testing.TB, name string) [][]byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	rd := sse.NewReader(bytes.NewReader(b))
	var evs [][]byte
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			tb.Fatal(err)
		}
		evs = append(evs, sse.AppendData(nil, ev.Data))
	}
}

// replay serves a recorded stream event by event, flushing each, with gap
// between events: a fast, deterministic stand-in for llama-server.
func replay(tb testing.TB, evs [][]byte, gap time.Duration) *httptest.Server {
	return replayNoting(tb, evs, gap, nil)
}

// replayNoting is replay that stores in *arrived, when set, the time
// (Unix nanoseconds) each request's body was read.
func replayNoting(tb testing.TB, evs [][]byte, gap time.Duration, arrived *atomic.Int64) *httptest.Server {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if arrived != nil {
			arrived.Store(time.Now().UnixNano())
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Keep-Alive", "timeout=5, max=100")
		f := w.(http.Flusher)
		for _, ev := range evs {
			if gap > 0 {
				time.Sleep(gap)
			}
			if _, err := w.Write(ev); err != nil {
				return
			}
			f.Flush()
		}
	}))
	s.Config.MaxHeaderBytes = 1 << 16
	s.Start()
	tb.Cleanup(s.Close)
	return s
}

type sample struct {
	ttft, total time.Duration
	chunks      int
	content     string
}

// measure sends one streaming request and times the first content byte
// and the end of the stream.
func measure(c *http.Client, url string, body []byte) (sample, error) {
	t0 := time.Now()
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return sample{}, fmt.Errorf("status %d", resp.StatusCode)
	}
	var s sample
	rd := sse.NewReader(resp.Body)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return s, err
		}
		if ev.Done() {
			continue
		}
		s.chunks++
		if s.ttft == 0 && bytes.Contains(ev.Data, []byte(`"content":"`)) {
			s.ttft = time.Since(t0)
		}
		var c struct {
			Choices []struct{ Delta struct{ Content string } }
		}
		if json.Unmarshal(ev.Data, &c) == nil && len(c.Choices) > 0 {
			s.content += c.Choices[0].Delta.Content
		}
	}
	s.total = time.Since(t0)
	return s, nil
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func reverseProxy(tb testing.TB, target string) *httptest.Server {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.Transport = resendOnEOF{upstream.NewClient().Transport}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex() // as the gateway's pass-through (proxy.go)
		// A body that can be read again, for resendOnEOF.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		rp.ServeHTTP(w, r)
	}))
	tb.Cleanup(s.Close)
	return s
}

// resendOnEOF sends a request again, once, when its pooled connection
// died before an answer, as Aegis does upstream (llamaserver.Resend):
// llama-server closes the connection after a streamed answer without
// saying so.
type resendOnEOF struct{ http.RoundTripper }

func (t resendOnEOF) RoundTrip(r *http.Request) (*http.Response, error) {
	first := true
	return llamaserver.Resend(r.Context(), 1, func(ctx context.Context) (*http.Response, error) {
		req := r.WithContext(ctx)
		if !first {
			body, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			req.Body = body
		}
		first = false
		return t.RoundTripper.RoundTrip(req)
	})
}

// overhead runs b.N rounds of the same streaming request directly, through
// a plain httputil.ReverseProxy and through Aegis (default policy),
// interleaved, and reports what each adds to the direct request.
func overhead(b *testing.B, upURL string, body []byte, pol *policy.Policy) {
	up := mustUpstream(b, "up", upURL, upstream.KindLlamaServer)
	bus := &events.Bus{}
	sub := bus.Subscribe(1 << 16)
	defer sub.Close()
	aegis := start(b, &Gateway{Upstreams: []*upstream.Upstream{up}, Events: bus, Policy: pol})
	proxy := reverseProxy(b, upURL)
	client := &http.Client{Transport: upstream.NewClient().Transport}
	defer client.CloseIdleConnections()
	var dA, dP []time.Duration     // added TTFT per round: aegis, proxy
	var cA, cP []time.Duration     // added per-chunk time per round
	var tD, tA, tP []time.Duration // raw TTFTs
	targets := []string{upURL, proxy.URL, aegis.URL}
	names := []string{"direct", "proxy", "aegis"}
	for range 3 { // warm the connection pools
		for i, u := range targets {
			// The plain proxy breaks some streams when llama-server closes a
			// kept-alive connection: a warm-up error is logged, and the
			// rounds below count errors per target.
			if _, err := measure(client, u+"/v1/chat/completions", body); err != nil {
				b.Logf("warm-up, %s: %v", names[i], err)
			}
		}
	}
	var errs [3]int
	b.ResetTimer()
rounds:
	for b.Loop() {
		var s [3]sample
		for i, u := range targets {
			var err error
			if s[i], err = measure(client, u+"/v1/chat/completions", body); err != nil {
				if errs[i] == 0 {
					b.Logf("%s: %v", names[i], err)
				}
				errs[i]++
				continue rounds
			}
		}
		// Aegis may split chunks at the release point; the text must match.
		if s[0].content != s[2].content || s[0].content != s[1].content {
			b.Fatalf("content differs:\ndirect %q\nproxy  %q\naegis  %q", s[0].content, s[1].content, s[2].content)
		}
		tD, tP, tA = append(tD, s[0].ttft), append(tP, s[1].ttft), append(tA, s[2].ttft)
		dA, dP = append(dA, s[2].ttft-s[0].ttft), append(dP, s[1].ttft-s[0].ttft)
		n := time.Duration(s[0].chunks)
		cA, cP = append(cA, (s[2].total-s[0].total)/n), append(cP, (s[1].total-s[0].total)/n)
	}
	// Aegis's own view: from the first upstream chunk read to the first
	// chunk written to the client, without the network hops' scheduling.
	var inner []time.Duration
	for len(sub.C) > 0 {
		if e := <-sub.C; e.Kind == events.RequestFinished {
			inner = append(inner, e.AddedTTFT)
		}
	}
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	for i, n := range names {
		b.ReportMetric(float64(errs[i]), n+"-errors")
	}
	b.ReportMetric(us(pct(inner, .5)), "aegis-inner-added-ttft-p50-µs")
	b.ReportMetric(us(pct(inner, .99)), "aegis-inner-added-ttft-p99-µs")
	b.ReportMetric(us(pct(tD, .5)), "direct-ttft-p50-µs")
	b.ReportMetric(us(pct(tP, .5)), "proxy-ttft-p50-µs")
	b.ReportMetric(us(pct(tA, .5)), "aegis-ttft-p50-µs")
	b.ReportMetric(us(pct(dA, .5)), "aegis-added-ttft-p50-µs")
	b.ReportMetric(us(pct(dA, .99)), "aegis-added-ttft-p99-µs")
	b.ReportMetric(us(pct(dP, .5)), "proxy-added-ttft-p50-µs")
	b.ReportMetric(us(pct(dP, .99)), "proxy-added-ttft-p99-µs")
	b.ReportMetric(us(pct(cA, .5)), "aegis-added-chunk-p50-µs")
	b.ReportMetric(us(pct(cP, .5)), "proxy-added-chunk-p50-µs")
}

var benchBody = []byte(`{"messages":[{"role":"user","content":"Tell me a story about a dog."}],"stream":true,"temperature":0,"max_tokens":200}`)

// policies are the two check stacks the overhead benchmarks compare:
// the default policy, whose repetition check holds back the last tokens
// that could still begin a loop (and whose leak check holds back what
// could still become a secret), and the same without those two, which
// shows what the gateway itself adds.
func policies(b *testing.B) []struct {
	name string
	pol  *policy.Policy
} {
	return []struct {
		name string
		pol  *policy.Policy
	}{{"default", nil}, {"no-holdback", mustPolicy(b, "checks: {repetition: false, leak: false}\n")}}
}

// BenchmarkOverheadReplay measures against a local upstream that replays
// a recorded llama-server stream paced at 250 µs per chunk (4,000 tokens/s,
// faster than llama-server on this machine): time to first token and the
// per-chunk delay as a client sees them.
func BenchmarkOverheadReplay(b *testing.B) {
	url := replay(b, recorded(b, "llama-chat-200.sse"), 250*time.Microsecond).URL
	for _, p := range policies(b) {
		b.Run(p.name, func(b *testing.B) { overhead(b, url, benchBody, p.pol) })
	}
}

// BenchmarkOverheadReplayBurst replays the same stream with no pacing at
// all: the added per-chunk time is then Aegis's processing cost per chunk.
// (Its TTFT figures say little: on 2 cores the client's reader waits
// while Aegis works through the burst.)
func BenchmarkOverheadReplayBurst(b *testing.B) {
	url := replay(b, recorded(b, "llama-chat-200.sse"), 0).URL
	for _, p := range policies(b) {
		b.Run(p.name, func(b *testing.B) { overhead(b, url, benchBody, p.pol) })
	}
}

// BenchmarkOverheadLlamaServer measures against the real llama-server.
func BenchmarkOverheadLlamaServer(b *testing.B) {
	env := testbed.Require(b, "llama-cpu")
	body := []byte(`{"messages":[{"role":"user","content":"Tell me a story about a dog."}],"stream":true,"temperature":0,"max_tokens":32}`)
	for _, p := range policies(b) {
		b.Run(p.name, func(b *testing.B) { overhead(b, env.LlamaCPUURL, body, p.pol) })
	}
}

// BenchmarkConcurrentStreams holds 2,000 streams open through Aegis at
// once (each a recorded 50-chunk stream paced at 20 ms per chunk, about
// one second) and counts failures; it reports the wall time of the batch.
func BenchmarkConcurrentStreams(b *testing.B) {
	const streams = 2000
	evs := recorded(b, "llama-chat-200.sse")
	evs = append(evs[:50:50], evs[len(evs)-2:]...)
	upSrv := replay(b, evs, 20*time.Millisecond)
	up := mustUpstream(b, "up", upSrv.URL, upstream.KindLlamaServer)
	aegis := start(b, &Gateway{Upstreams: []*upstream.Upstream{up}})
	tr := upstream.NewClient().Transport.(*http.Transport)
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()
	var failed atomic.Int64
	var first error
	var once sync.Once
	for b.Loop() {
		var wg sync.WaitGroup
		t0 := time.Now()
		for range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "POST", aegis.URL+"/v1/chat/completions", bytes.NewReader(benchBody))
				resp, err := client.Do(req)
				if err == nil {
					var s sample
					rd := sse.NewReader(resp.Body)
					for {
						ev, e := rd.Next()
						if e != nil {
							if e != io.EOF {
								err = e
							}
							break
						}
						if bytes.Contains(ev.Data, []byte(`"error"`)) {
							err = fmt.Errorf("error event: %s", ev.Data)
						}
						s.chunks++
					}
					resp.Body.Close()
					if err == nil && s.chunks != len(evs) {
						err = fmt.Errorf("%d events, want %d", s.chunks, len(evs))
					}
				}
				if err != nil {
					failed.Add(1)
					once.Do(func() { first = err })
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(time.Since(t0).Seconds(), "batch-s")
	}
	b.ReportMetric(streams, "streams")
	b.ReportMetric(float64(failed.Load()), "failed")
	if first != nil {
		b.Errorf("%d streams failed; first: %v", failed.Load(), first)
	}
}
