package llm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// streamText is the main model's output in the time-to-verdict
// benchmark: about 250 stories260K tokens.
var streamText = strings.Repeat("Lily went to the park with her mom. She saw a big dog and a red ball. ", 6)

// BenchmarkTimeToVerdict measures the time from the main model's last
// token to the guard's verdict, on the testbed's llama-server (CPU and
// Vulkan0), cold (the guard sees the whole text only at the end) and warm
// (incremental prefill: the growing prefix was sent with n_predict 0
// every 32 bytes while the text streamed, into the pinned slot). Each
// iteration uses a new text (a nonce at its start) so neither the slot
// nor the server's RAM prompt cache holds it beforehand; the fixed
// instructions are warm in both cases.
//
//	AEGIS_TESTBED_ENV=... go test -run '^$' -bench TimeToVerdict -benchtime 5x ./internal/guard/llm/
func BenchmarkTimeToVerdict(b *testing.B) {
	env := testbed.Require(b, "llama-cpu", "llama-vulkan")
	servers := []struct {
		name string
		url  string
		slot int
	}{{"cpu", env.LlamaCPUURL, 3}, {"vulkan0", env.LlamaVulkanURL, 1}}
	for _, s := range servers {
		for _, warm := range []bool{false, true} {
			mode := "cold"
			if warm {
				mode = "prefill"
			}
			b.Run(s.name+"/"+mode, func(b *testing.B) {
				c := &Client{BaseURL: s.url, Slot: s.slot}
				ctx := context.Background()
				var evaluated, total int
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					text := fmt.Sprintf("Day %d-%d. %s", time.Now().UnixNano()%100000, i, streamText)
					if warm {
						for end := 32; end < len(text); end += 32 {
							if err := c.Prefill(ctx, BuildPrompt(TaskSafety, "", text[:end])); err != nil {
								b.Fatal(err)
							}
						}
						if err := c.Prefill(ctx, BuildPrompt(TaskSafety, "", text)); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
					res, err := c.Check(ctx, TaskSafety, BuildPrompt(TaskSafety, "", text))
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					evaluated += res.PromptTokens
					total += res.PromptTokens + res.CachedTokens
				}
				b.ReportMetric(float64(evaluated)/float64(b.N), "evaluated-tok/op")
				b.ReportMetric(float64(total)/float64(b.N), "prompt-tok/op")
			})
		}
	}
}
