package llm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// BenchmarkNativeTimeToVerdict measures, for every protocol, the time
// from the main model's last token to the guard's verdict (the decision
// token: decided-ms/op) and to its whole answer (ns/op), on a private
// llama-server on the CPU and on Vulkan0 serving the synthesized GGUF of
// the protocol's model. Cold: the guard sees the answer only at its end;
// prefill: the growing prompt was sent with n_predict 0 every 32 bytes
// while the answer streamed, so only the tail and the answer are new.
// Each iteration judges a new text (a nonce at its start).
//
//	AEGIS_TESTBED_ENV=... go test -run '^$' -bench NativeTimeToVerdict -benchtime 3x ./internal/guard/llm/
func BenchmarkNativeTimeToVerdict(b *testing.B) {
	env := testbed.Require(b, "llama-cpu", "llama-vulkan")
	testbed.Measuring(b)
	dir := b.TempDir()
	for _, vulkan := range []bool{false, true} {
		dev := "cpu"
		if vulkan {
			dev = "vulkan0"
		}
		for i, m := range synthModels[:len(synthModels)-1] {
			url, _ := startLlamaModel(b, env, synthGuard(b, env, dir, i), vulkan)
			c := &Client{BaseURL: url, Slot: 0}
			for _, warm := range []bool{false, true} {
				mode := "cold"
				if warm {
					mode = "prefill"
				}
				b.Run(fmt.Sprintf("%s/%s/%s", dev, m.p, mode), func(b *testing.B) {
					ctx := context.Background()
					var decided time.Duration
					var evaluated int
					for j := 0; j < b.N; j++ {
						b.StopTimer()
						text := fmt.Sprintf("Day %d-%d. %s", time.Now().UnixNano()%100000, j, streamText)
						s := Subject{Mode: ModeResponse, User: "Tell me a story.", Text: text}
						if warm {
							for end := 32; end <= len(text); end += 32 {
								s.Text = text[:end]
								if err := c.Prefill(ctx, c.NativePrompt(ctx, m.p, s)); err != nil {
									b.Fatal(err)
								}
							}
							s.Text = text
						}
						b.StartTimer()
						res, err := c.CheckNative(ctx, m.p, s)
						b.StopTimer()
						if err != nil {
							b.Fatal(err)
						}
						decided += res.Decided
						evaluated += res.PromptTokens
					}
					b.ReportMetric(float64(decided.Microseconds())/1000/float64(b.N), "decided-ms/op")
					b.ReportMetric(float64(evaluated)/float64(b.N), "evaluated-tok/op")
				})
			}
		}
	}
}
