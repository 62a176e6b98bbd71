package store

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// BenchmarkPostgresAdd is the incident log's write capacity: incidents
// stored per second by a few writers and by several times as many writing at once.
func BenchmarkPostgresAdd(b *testing.B) {
	pg := testbed.StartPostgres(b)
	for _, par := range []int{1, 4} {
		b.Run(fmt.Sprintf("writers=%d", par*runtime.GOMAXPROCS(0)), func(b *testing.B) {
			p, err := OpenPostgres(context.Background(), pg.URL, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.SetParallelism(par)
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := p.Add(context.Background(), pgIncident("bench", validator.ReasonStall)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "incidents/s")
		})
	}
}
