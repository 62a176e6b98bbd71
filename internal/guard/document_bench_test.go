package guard

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/guardlab/doccorpus"
)

// benchDocsPerKind is how many training documents of each kind the
// corpus benchmark screens: spread over the kind's lengths, shortest to
// longest.
const benchDocsPerKind = 8

var benchCorpus = sync.OnceValues(func() (map[doccorpus.Kind][]string, error) {
	docs, err := doccorpus.Build(doccorpus.DefaultOptions())
	if err != nil {
		return nil, err
	}
	train, _ := doccorpus.Split(docs) // never the held-out part
	by := map[doccorpus.Kind][]string{}
	for _, d := range train {
		by[d.Kind] = append(by[d.Kind], d.Text)
	}
	out := map[doccorpus.Kind][]string{}
	for k, texts := range by {
		slices.SortFunc(texts, func(a, b string) int { return len(a) - len(b) })
		n := min(benchDocsPerKind, len(texts))
		for i := 0; i < n; i++ {
			out[k] = append(out[k], texts[i*(len(texts)-1)/max(1, n-1)])
		}
	}
	return out, nil
})

// BenchmarkScoreToolResultCorpus: the screen's cost on real documents of
// every kind the corpus holds (its training part), per kind and for all
// together, reported in microseconds per KiB of result: us/KiB of wall
// time and cpu-us/KiB of the process's CPU time (the cost on the cores,
// without the time spent waiting for one on a busy machine).
func BenchmarkScoreToolResultCorpus(b *testing.B) {
	g, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	by, err := benchCorpus()
	if err != nil {
		b.Skip("no document corpus on this machine:", err)
	}
	var all []string
	run := func(name string, texts []string) {
		if len(texts) == 0 {
			return
		}
		bytes := 0
		for _, t := range texts {
			bytes += len(t)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(bytes))
			perKiB := func(d time.Duration) float64 {
				return float64(d.Nanoseconds()) / 1e3 / float64(b.N) / (float64(bytes) / 1024)
			}
			b.ResetTimer()
			start := time.Now()
			cpu0, cpuOK := processCPU()
			for i := 0; i < b.N; i++ {
				for _, t := range texts {
					g.ScoreToolResult(t)
				}
			}
			cpu1, _ := processCPU()
			b.ReportMetric(perKiB(time.Since(start)), "us/KiB")
			if cpuOK {
				b.ReportMetric(perKiB(cpu1-cpu0), "cpu-us/KiB")
			}
		})
	}
	for _, k := range doccorpus.Kinds {
		all = append(all, by[k]...)
		run(string(k), by[k])
	}
	run("all", all)
}
