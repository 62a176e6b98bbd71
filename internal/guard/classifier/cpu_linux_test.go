package classifier

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// BenchmarkScore512TokensCPU reports percentiles of the CPU time one
// 512-token score takes on its thread: the cost on one core, without the
// time the thread spends waiting for a core on a busy machine (which the
// wall-clock percentiles of BenchmarkScore512TokensP99 include).
func BenchmarkScore512TokensCPU(b *testing.B) {
	m, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	s := text512()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := threadCPU(b)
		m.Scores(s)
		lat = append(lat, threadCPU(b)-t0)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-cpu-µs")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-cpu-µs")
}
