package llm_test

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/checks"
	"github.com/aegis-sentinel/aegis/internal/gateway"
	"github.com/aegis-sentinel/aegis/internal/guard/standin"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// The recorded H200 machine's shapes: the main model streamed 128 tokens
// at about 340 tokens/s after a 28 ms time to first token; the CPU guard
// prefilled at about 600 tokens/s and decoded at about 50, with one slot.
const (
	keepMainTokens = 128
	keepMainTPS    = 340.0
	keepMainTTFT   = 28 * time.Millisecond
	keepPrefillTPS = 600.0
	keepDecodeTPS  = 50.0
	keepOverhead   = 3 * time.Millisecond // per guard task: HTTP, sampling, scheduling
)

var keepWords = strings.Fields(`the river bends past old mills where farmers once brought grain each autumn and
millers ground it into flour for bread that fed whole villages through long winters while children played on
frozen ponds and elders told stories of floods droughts and harvests that shaped the valley over centuries`)

// timedUpstream streams an OpenAI chat completion of keepMainTokens words
// at keepMainTPS after keepMainTTFT, and records when it wrote the first
// and the last token.
type timedUpstream struct {
	mu          sync.Mutex
	n           int
	first, last time.Time
}

func (u *timedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.n++
	n := u.n
	u.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	f := w.(http.Flusher)
	chunk := func(delta, finish string) string {
		fin := "null"
		if finish != "" {
			fin = `"` + finish + `"`
		}
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + fin + "}]}\n\n"
	}
	start := time.Now()
	step := time.Second * 1000 / time.Duration(keepMainTPS*1000)
	var first, last time.Time
	for i := range keepMainTokens {
		word := keepWords[(i*7+n)%len(keepWords)]
		if i == 0 {
			word = fmt.Sprintf("Reply %d:", n) // a new text each time: the guard's cache never holds it
		}
		time.Sleep(time.Until(start.Add(keepMainTTFT + time.Duration(i)*step)))
		if _, err := w.Write([]byte(chunk(`{"content":" `+word+`"}`, ""))); err != nil {
			return
		}
		f.Flush()
		if i == 0 {
			first = time.Now()
		}
		last = time.Now()
	}
	w.Write([]byte(chunk(`{}`, "stop") + "data: [DONE]\n\n"))
	f.Flush()
	u.mu.Lock()
	u.first, u.last = first, last
	u.mu.Unlock()
}

// BenchmarkGuardKeepsUp is the acceptance benchmark for a guard that keeps
// up with the main model: the gateway in watermark release in front of a
// main model streaming 128 tokens at 340 tokens/s, with a guard stand-in
// at the recorded CPU guard's speed (prefill 600, decode 50 tokens/s, one
// slot), before (schedule fixed, the earlier behaviour) and after
// (schedule adaptive). It reports the time the gateway added to the first
// token (client's first content byte minus the upstream's first token
// write) and the time from the upstream's last token to the verdict
// reaching the client, medians and 90th percentiles over b.N requests,
// for answers that pass.
//
// In warm-slot the guard's slot still holds the previous request's prompt,
// so its instructions are cached (consecutive requests, as recorded); in
// cold-slot the slot is emptied before each request (another request used
// it), so the fixed part of the prompt must be prefilled first.
//
//	go test -run '^$' -bench GuardKeepsUp -benchtime 20x ./internal/guard/llm/
func BenchmarkGuardKeepsUp(b *testing.B) {
	checks.RegisterDefault()
	for _, slot := range []string{"warm-slot", "cold-slot"} {
		for _, sched := range []string{"fixed", "adaptive"} {
			b.Run(slot+"/"+sched, func(b *testing.B) { benchKeepUp(b, sched, slot == "cold-slot") })
		}
	}
}

func benchKeepUp(b *testing.B, sched string, cold bool) {
	guard := standin.New(standin.Config{PrefillTPS: keepPrefillTPS, DecodeTPS: keepDecodeTPS, Slots: 1, Overhead: keepOverhead})
	gsrv := httptest.NewServer(guard)
	defer gsrv.Close()
	up := &timedUpstream{}
	usrv := httptest.NewServer(up)
	defer usrv.Close()
	u, err := upstream.New("main", usrv.URL, upstream.KindLlamaServer)
	if err != nil {
		b.Fatal(err)
	}
	defer u.Client.CloseIdleConnections()
	pol, err := policy.Parse([]byte("release: watermark\nchecks:\n  repetition: false\n  guard_llm: {url: "+gsrv.URL+
		", protocol: verdict-json, deadline: 2s, schedule: "+sched+"}\n"), "bench", validator.Default)
	if err != nil {
		b.Fatal(err)
	}
	gw := httptest.NewServer(&gateway.Gateway{Upstreams: []*upstream.Upstream{u}, Policy: pol})
	defer gw.Close()
	client := &http.Client{}
	defer client.CloseIdleConnections()

	one := func() (added, verdict time.Duration) {
		if cold {
			guard.Evict()
		}
		resp, err := client.Post(gw.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"messages":[{"role":"user","content":"Tell me about the valley."}],"stream":true}`))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var firstAt, verdictAt time.Time
		var verdictLine string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if firstAt.IsZero() && strings.Contains(line, `"content":" `) {
				firstAt = time.Now()
			}
			if strings.Contains(line, `"aegis"`) {
				verdictAt, verdictLine = time.Now(), line
			}
		}
		if firstAt.IsZero() || verdictAt.IsZero() {
			b.Fatalf("no content or no verdict (status %d)", resp.StatusCode)
		}
		if !strings.Contains(verdictLine, `"verdict":"pass"`) {
			b.Fatalf("the answer did not pass: %.400s", verdictLine)
		}
		up.mu.Lock()
		defer up.mu.Unlock()
		return firstAt.Sub(up.first), verdictAt.Sub(up.last)
	}
	one() // the guard's slot starts empty; a served guard has its instructions cached
	tasks := len(guard.Tasks())
	var added, verdict []time.Duration
	b.ResetTimer()
	for range b.N {
		a, v := one()
		added, verdict = append(added, a), append(verdict, v)
	}
	b.StopTimer()
	ms := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(added, 0.5), "added-ttft-ms/p50")
	b.ReportMetric(ms(added, 0.9), "added-ttft-ms/p90")
	b.ReportMetric(ms(verdict, 0.5), "verdict-ms/p50")
	b.ReportMetric(ms(verdict, 0.9), "verdict-ms/p90")
	b.ReportMetric(float64(len(guard.Tasks())-tasks)/float64(b.N), "guard-tasks/op")
}
