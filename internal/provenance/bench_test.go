package provenance

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchText is n bytes of mail-like prose with figures and an address.
func benchText(n, seed int) string {
	words := strings.Fields("the quarterly review of shipments to Espoo and Leeds shows 412 returns; invoice INV-2291 " +
		"from Brakeline GmbH is due on 15 December, contact dana@halcyon.example or call +44 7700 900 318 before Friday, " +
		"pallets stacked at depot Kessel were counted twice and the staging migration finished without errors")
	var b strings.Builder
	for i := seed; b.Len() < n; i++ {
		b.WriteString(words[(i*7+seed)%len(words)])
		if i%13 == 0 {
			fmt.Fprintf(&b, " %d", i*7919%100000)
		}
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// BenchmarkProvenance is the flow rule's tracing for one request: index
// the conversation (a 1 KiB system prompt, a user message, 6 KiB of tool
// results and a declaration) and trace 1 KiB of arguments, decodings
// included. Bytes are the conversation's and the arguments' together, so
// ns/op divided by KiB is the cost per KiB the budget is stated in.
func BenchmarkProvenance(b *testing.B) {
	srcs := []Source{
		{Kind: System, Text: benchText(1024, 1) + " Deploy key: mirror-7Q2x-Lattice."},
		{Kind: User, Text: benchText(200, 2)},
		{Kind: Result, Tool: "search_emails", Text: benchText(3072, 3)},
		{Kind: Result, Tool: "read_file", Text: benchText(3072, 4)},
		{Kind: Declaration, Tool: "send_email", Text: `send_email Send an e-mail {"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}}}`},
	}
	values := []string{"dana@halcyon.example", "Weekly notes", benchText(1000, 5) + " 6d6972726f722d375132782d4c617474696365"}
	total := 0
	for _, s := range srcs {
		total += len(s.Text)
	}
	for _, v := range values {
		total += len(v)
	}
	b.Run("request", func(b *testing.B) {
		// A request's first call: fold the conversation, then trace.
		benchTrace(b, total, values, func() *Index { return New(srcs) })
	})
	b.Run("call", func(b *testing.B) {
		// A later call of the same request: the conversation is folded.
		ix := New(srcs)
		benchTrace(b, total, values, func() *Index { return ix })
	})
}

func benchTrace(b *testing.B, total int, values []string, index func() *Index) {
	b.SetBytes(int64(total))
	b.ReportAllocs()
	ts := make([]Trace, len(values))
	cpu0 := cpuTime()
	for b.Loop() {
		ix := index()
		for i := range ts {
			ts[i] = Trace{Runs: ts[i].Runs[:0]}
		}
		ix.TraceAll(values, ts)
	}
	kib := float64(total) / 1024
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000/kib, "us/KiB")
	// The process's CPU time per KiB: on a loaded machine wall time also
	// counts the waits for a core.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/1000/kib, "cpu-us/KiB")
}
