package repetition_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/checks"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/banned"
	"github.com/aegis-sentinel/aegis/internal/validator/leak"
	"github.com/aegis-sentinel/aegis/internal/validator/length"
	"github.com/aegis-sentinel/aegis/internal/validator/repetition"
	"github.com/aegis-sentinel/aegis/internal/validator/stall"
)

// BenchmarkTextStack runs the text checks of this branch together, as a
// pipeline would with a policy that enables all of them (repetition,
// stall, length with every limit, banned terms and libraries, leak with a
// system prompt), over typical output in 16-byte chunks (about four
// tokens). It reports ns per chunk for the whole set: the budget for the
// full default stack is 2 µs per chunk.
func BenchmarkTextStack(b *testing.B) {
	var sb strings.Builder
	for _, f := range []string{"pass_prose_essay.txt", "pass_numbered_list.txt", "pass_go_code.go.txt", "pass_poem_refrain.txt", "pass_markdown_table.txt"} {
		data, err := os.ReadFile("testdata/corpus/" + f)
		if err != nil {
			b.Fatal(err)
		}
		sb.Write(data)
	}
	text := []byte(sb.String())
	req := &validator.Request{Messages: []validator.Message{
		{Role: "system", Content: "You are SupportBot for Acme Cloud. Only answer questions about Acme Cloud billing, invoices and plan upgrades. Never discuss competitors or give legal advice. The admin password: Zebra!Orchid-7731."},
		{Role: "user", Content: "Explain the energy transition."},
	}}
	build := func() ([]validator.Validator, *stall.Watchdog) {
		var vs []validator.Validator
		for _, s := range []struct {
			name string
			cfg  any
		}{
			{repetition.Name, repetition.DefaultConfig()},
			{length.Name, &length.Config{MaxWords: 1 << 20, MaxSentences: 1 << 20, MaxChars: 1 << 20, MaxTokens: 1 << 20, MaxLines: 1 << 20, MaxParagraphs: 1 << 20}},
			{banned.Name, &banned.Config{Terms: []string{"as an AI language model", "lorem ipsum", "guaranteed returns"}, Libraries: []string{"pandas", "lodash"}}},
			{leak.Name, leak.DefaultConfig()},
		} {
			spec, _ := checks.Registry().Lookup(s.name)
			v, err := spec.New(s.cfg, req)
			if err != nil || v == nil {
				b.Fatalf("%s: %v", s.name, err)
			}
			vs = append(vs, v)
		}
		w := stall.New(*stall.DefaultConfig(), stall.Options{})
		return append(vs, w), w
	}
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	b.ResetTimer()
	type stack struct {
		vs []validator.Validator
		w  *stall.Watchdog
	}
	var batch []stack
	for chunks := 0; chunks < b.N; {
		if len(batch) == 0 {
			// Build validators in batches: stopping the timer reads the
			// memory statistics, too costly to do once per pass.
			b.StopTimer()
			for range 64 {
				vs, w := build()
				batch = append(batch, stack{vs, w})
			}
			b.StartTimer()
		}
		vs, w := batch[0].vs, batch[0].w
		batch = batch[1:]
		for off := 0; off < len(text) && chunks < b.N; off += 16 {
			p := text[off:min(off+16, len(text))]
			now = now.Add(20 * time.Millisecond)
			w.Tick(now)
			release := len(text)
			for _, v := range vs {
				v.Write(p)
				release = min(release, v.Settled())
			}
			_ = release
			chunks++
		}
	}
}
