package gateway

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
)

// BenchmarkTextVsReasoning: the chunk path (parse, check, release,
// write) of the recorded llama-server answer, once as text and once with
// the same bytes as reasoning_content, under the default checks. Bytes
// are the text's, so MB/s (and ns/op over bytes/op) compare the cost per
// byte of the two.
func BenchmarkTextVsReasoning(b *testing.B) {
	evs := recorded(b, "llama-chat-200.sse")
	var text [][]byte
	var n int64
	for _, ev := range evs {
		p := ev[len("data: ") : len(ev)-2]
		if string(p) == "[DONE]" {
			continue
		}
		text = append(text, p)
		var f chunkscan.Fields
		if chunkscan.Scan(chunkscan.Chat, p, &f) == nil && f.Text.Present() {
			n += int64(f.Text.End - f.Text.Start - 2)
		}
	}
	reasoning := make([][]byte, len(text))
	for i, p := range text {
		reasoning[i] = bytes.Replace(p, []byte(`"delta":{"content":`), []byte(`"delta":{"reasoning_content":`), 1)
	}
	for _, v := range []struct {
		name     string
		payloads [][]byte
	}{{"text", text}, {"reasoning", reasoning}} {
		b.Run(v.name, func(b *testing.B) {
			g := &Gateway{}
			x := &exchange{g: g, w: &discardWriter{h: http.Header{}}, route: dialectChat, req: request{stream: true}}
			if err := x.decode(benchBody); err != nil {
				b.Fatal(err)
			}
			x.bindReleaser()
			var chk Checker
			var c chunk
			now := time.Now()
			b.SetBytes(n / int64(len(v.payloads)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j := i % len(v.payloads)
				if j == 0 {
					b.StopTimer()
					var err error
					if chk, err = g.newChecker(x.req.vreq); err != nil {
						b.Fatal(err)
					}
					x.out.text, x.out.sent, x.out.pending, x.cur, x.tpl = x.out.text[:0], 0, x.out.pending[:0], attemptState{}, template{}
					x.out.rsn, x.out.fieldRsn, x.out.hidden = x.out.rsn[:0], x.out.fieldRsn[:0], x.out.hidden[:0]
					b.StartTimer()
				}
				p := v.payloads[j]
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
