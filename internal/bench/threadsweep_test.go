package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordedRow reads one thread count of the recorded H200 machine's sweep
// (the guard's llama-server beside Ollama's CUDA main model).
func recordedRow(t *testing.T, threads int) ThreadRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "h200", fmt.Sprintf("sweep-t%d.json", threads)))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		MainAlone     []float64 `json:"main_alone_tok_s"`
		VerdictAlone  []float64 `json:"guard_alone_verdict_ms"`
		MainBeside    []float64 `json:"main_with_guard_tok_s"`
		VerdictBeside []float64 `json:"guard_beside_main_verdict_ms"`
		Share         float64   `json:"main_share"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	r := ThreadRow{Threads: threads, MainAlone: summarize(rec.MainAlone), MainBeside: summarize(rec.MainBeside),
		VerdictAlone: summarize(rec.VerdictAlone), VerdictBeside: summarize(rec.VerdictBeside)}
	if d := r.MainShare() - rec.Share; d > 1e-9 || d < -1e-9 {
		t.Fatalf("t%d: share %.4f, recorded %.4f", threads, r.MainShare(), rec.Share)
	}
	return r
}

// TestThreadSweepRecorded: the recorded sweep (16, 14, 12, 8 threads on
// 16 cores) prints the table's columns and recommends 14 threads, whose
// verdict beside decode was as fast as alone; 16 threads, which stalled
// behind the main server's host thread, is not recommended.
func TestThreadSweepRecorded(t *testing.T) {
	s := &ThreadSweep{}
	for _, n := range []int{16, 14, 12, 8} {
		s.Rows = append(s.Rows, recordedRow(t, n))
	}
	s.Recommended, s.Reason = RecommendThreads(s.Rows)
	if s.Recommended != 14 {
		t.Errorf("recommended %d threads (%s), want 14", s.Recommended, s.Reason)
	}
	var out bytes.Buffer
	WriteThreadSweep(&out, s)
	got := out.String()
	for _, want := range []string{"guard threads", "main decode share", "verdict alone ms", "verdict beside decode ms",
		"0.968", "0.987", "9383", "764", "recommendation: guard threads 14"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	golden(t, filepath.Join("testdata", "h200", "thread-sweep.txt"), got)
}

func TestRecommendThreads(t *testing.T) {
	row := func(threads int, share float64, beside []float64) ThreadRow {
		return ThreadRow{Threads: threads, MainAlone: summarize([]float64{100}), MainBeside: summarize([]float64{100 * share}),
			VerdictAlone: summarize([]float64{500}), VerdictBeside: summarize(beside)}
	}
	cases := []struct {
		name string
		rows []ThreadRow
		want int
	}{
		{"fastest within slack", []ThreadRow{row(8, 0.99, []float64{900, 900, 900}), row(6, 0.995, []float64{1200, 1200, 1200})}, 8},
		{"share too low", []ThreadRow{row(8, 0.90, []float64{400, 400, 400}), row(6, 0.99, []float64{900, 900, 900})}, 6},
		{"one sample is an anecdote", []ThreadRow{row(8, 0.99, []float64{300}), row(6, 0.99, []float64{900, 900, 900})}, 6},
		{"only anecdotes", []ThreadRow{row(8, 0.99, []float64{300}), row(6, 0.99, []float64{900})}, 8},
		{"nothing beside", []ThreadRow{row(8, 0.99, nil)}, 0},
		{"error row", []ThreadRow{{Threads: 8, Error: "no server"}, row(6, 0.99, []float64{900, 900, 900})}, 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := RecommendThreads(tc.rows); got != tc.want {
				t.Errorf("got %d (%s), want %d", got, why, tc.want)
			}
		})
	}
}

// fakeSweep is a machine where the guard's verdict takes 12 s/threads
// and, beside a decoding main model, stalls (ten times slower) when it
// takes every core; the main model, beside a verdict, loses a share that
// grows with the guard's threads. Verdict times are the fake's, not
// measured, and what overlaps is decided by handshakes, not by timing:
// each decode beside the guard hands itself to the verdict loop's next
// call, which answers while that decode runs, and the decode ends only
// when the loop calls again (so the verdict was recorded beside it).
// A row runs, as the sweep does, samples verdicts alone, samples decodes
// alone, then decodes beside the verdict loop.
type fakeSweep struct {
	cores   int
	samples int // decodes alone per row; the later ones run beside verdicts
	failAt  int
	decodes chan *fakeDecode // a decode beside the guard waits for a verdict

	mu      sync.Mutex
	threads int
	started []int
	decoded int         // decodes since the guard started
	pending *fakeDecode // the decode the last verdict answered beside
}

// fakeDecode is one decode beside the guard: recorded is closed when the
// verdict loop comes back after the verdict it ran beside this decode.
type fakeDecode struct{ recorded chan struct{} }

type fakeGuard struct{ f *fakeSweep }

func (f *fakeSweep) StartGuard(_ context.Context, threads int) (SweepGuard, func(), error) {
	if threads == f.failAt {
		return nil, nil, errors.New("server did not start")
	}
	f.mu.Lock()
	f.threads, f.decoded, f.pending = threads, 0, nil
	f.started = append(f.started, threads)
	f.mu.Unlock()
	return fakeGuard{f}, func() {}, nil
}

func (g fakeGuard) Verdict(ctx context.Context) (time.Duration, error) {
	f := g.f
	f.mu.Lock()
	threads, beside := f.threads, f.decoded > 0
	if f.pending != nil { // the loop is back: the last verdict was recorded
		close(f.pending.recorded)
		f.pending = nil
	}
	f.mu.Unlock()
	d := time.Duration(12000/threads) * time.Millisecond
	if !beside {
		return d, nil
	}
	select {
	case dec := <-f.decodes: // this verdict runs while dec decodes
		if threads >= f.cores {
			d *= 10
		}
		f.mu.Lock()
		f.pending = dec
		f.mu.Unlock()
		return d, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (f *fakeSweep) MainDecode(ctx context.Context) (float64, error) {
	f.mu.Lock()
	f.decoded++
	threads, beside := f.threads, f.decoded > f.samples
	f.mu.Unlock()
	speed := 340 - float64(threads)
	if !beside {
		return speed, nil
	}
	dec := &fakeDecode{recorded: make(chan struct{})}
	select {
	case f.decodes <- dec:
	case <-ctx.Done():
		return 0, fmt.Errorf("no verdict ran beside the decode: %w", ctx.Err())
	}
	select {
	case <-dec.recorded:
	case <-ctx.Done():
		return 0, fmt.Errorf("the verdict beside the decode was not recorded: %w", ctx.Err())
	}
	return speed * (1 - float64(threads)/1000), nil
}

func TestRunThreadSweep(t *testing.T) {
	f := &fakeSweep{cores: 16, samples: 3, failAt: 10, decodes: make(chan *fakeDecode)}
	// A sweep that never overlaps verdicts with decodes would wait forever
	// in the fake: the deadline turns that hang into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := RunThreadSweep(ctx, f, []int{16, 14, 10, 8}, f.samples)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rows) != 4 || s.Rows[2].Error == "" {
		t.Fatalf("rows %+v", s.Rows)
	}
	for _, r := range []ThreadRow{s.Rows[0], s.Rows[1], s.Rows[3]} {
		if r.VerdictAlone.N != 3 || r.MainAlone.N != 3 || r.MainBeside.N != 3 || r.VerdictBeside.N != 3 {
			t.Errorf("t%d: samples alone %d, main %d/%d, beside %d", r.Threads, r.VerdictAlone.N, r.MainAlone.N, r.MainBeside.N, r.VerdictBeside.N)
		}
		if want := 1 - float64(r.Threads)/1000; math.Abs(r.MainShare()-want) > 1e-9 {
			t.Errorf("t%d: main share %.4f, want %.4f", r.Threads, r.MainShare(), want)
		}
	}
	if s.Rows[0].VerdictBeside.Median <= s.Rows[0].VerdictAlone.Median {
		t.Errorf("16 threads beside decode %v, alone %v: the fake stalls it", s.Rows[0].VerdictBeside.Median, s.Rows[0].VerdictAlone.Median)
	}
	if s.Rows[1].VerdictBeside.Median != s.Rows[1].VerdictAlone.Median {
		t.Errorf("14 threads beside decode %v, alone %v: the fake does not stall it", s.Rows[1].VerdictBeside.Median, s.Rows[1].VerdictAlone.Median)
	}
	if s.Recommended != 14 {
		t.Errorf("recommended %d (%s), want 14", s.Recommended, s.Reason)
	}
	if _, err := RunThreadSweep(ctx, f, nil, 3); err == nil {
		t.Error("no thread counts accepted")
	}
}

var updateGolden = os.Getenv("AEGIS_UPDATE_GOLDEN") != ""

func golden(t *testing.T, path, got string) {
	t.Helper()
	if updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (AEGIS_UPDATE_GOLDEN=1 writes it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs:\n%s", path, got)
	}
}

// TestShareRecorded: the recorded interference run (five 128-token
// answers of the CUDA main model alone and beside the CPU guard answering
// verdicts back to back) gives its recorded share, with the range of the
// five answers.
func TestShareRecorded(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "h200", "interfere.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Alone  []float64 `json:"main_alone_tok_s"`
		Beside []float64 `json:"main_with_guard_tok_s"`
		Share  float64   `json:"main_share"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	share, rng := shareOf(summarize(rec.Alone).Median, summarize(rec.Beside))
	if d := share - rec.Share; d > 1e-9 || d < -1e-9 {
		t.Errorf("share %.4f, recorded %.4f", share, rec.Share)
	}
	if rng[0] > 0.95 || rng[0] < 0.93 || rng[1] < 1.0 || rng[1] > 1.01 {
		t.Errorf("range %.3f-%.3f, want about 0.939-1.005 (one answer at 320.8, one at 343.3 of a 341.7 median)", rng[0], rng[1])
	}
	if s, _ := shareOf(0, summarize(rec.Beside)); s != 0 {
		t.Errorf("no speed alone: share %v", s)
	}
}
