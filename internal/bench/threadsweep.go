package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

// ThreadRow is one guard thread count of a thread sweep beside a running
// main model: the main model's decode speed alone and while the guard
// answers verdicts back to back, and the guard's time to a verdict alone
// and while the main model decodes.
type ThreadRow struct {
	Threads       int    `json:"threads"`
	MainAlone     Stat   `json:"main_alone_tok_s"`
	MainBeside    Stat   `json:"main_beside_guard_tok_s"`
	VerdictAlone  Stat   `json:"verdict_alone_ms"`
	VerdictBeside Stat   `json:"verdict_beside_main_ms"`
	Error         string `json:"error,omitempty"`
}

// MainShare is the main model's decode speed with the guard busy as a
// share of alone (medians).
func (r ThreadRow) MainShare() float64 {
	if r.MainAlone.Median <= 0 {
		return 0
	}
	return r.MainBeside.Median / r.MainAlone.Median
}

// ShareRange is the spread of the share: the slowest and fastest decode
// beside the guard over the median alone.
func (r ThreadRow) ShareRange() (lo, hi float64) {
	if r.MainAlone.Median <= 0 {
		return 0, 0
	}
	return r.MainBeside.Min / r.MainAlone.Median, r.MainBeside.Max / r.MainAlone.Median
}

// ThreadSweep is the result of a guard thread sweep.
type ThreadSweep struct {
	Rows        []ThreadRow `json:"rows"`
	Recommended int         `json:"recommended_threads,omitempty"`
	Reason      string      `json:"reason,omitempty"`
}

// shareSlack is how much main-model share a thread count may give up
// against the best row and still be recommended for a faster verdict.
const shareSlack = 0.02

// minBesideSamples is the fewest verdicts beside decode that make a row's
// time to verdict a measurement rather than an anecdote.
const minBesideSamples = 3

// RecommendThreads picks the thread count whose verdict beside a decoding
// main model is fastest among those that keep the main model within
// shareSlack of the best share; rows with fewer than minBesideSamples
// verdicts beside decode (the guard stalled behind the main server) only
// when no row has enough.
func RecommendThreads(rows []ThreadRow) (int, string) {
	best := 0.0
	for _, r := range rows {
		if r.Error == "" {
			best = max(best, r.MainShare())
		}
	}
	pick := -1
	for pass := 0; pass < 2 && pick < 0; pass++ {
		for i, r := range rows {
			if r.Error != "" || r.VerdictBeside.N == 0 || r.MainShare() < best-shareSlack {
				continue
			}
			if pass == 0 && r.VerdictBeside.N < minBesideSamples {
				continue
			}
			if pick < 0 || r.VerdictBeside.Median < rows[pick].VerdictBeside.Median {
				pick = i
			}
		}
	}
	if pick < 0 {
		return 0, "no thread count measured a verdict beside the main model"
	}
	r := rows[pick]
	return r.Threads, fmt.Sprintf("fastest verdict beside the decoding main model (%.0f ms median, n %d) while keeping it at %.3f of its speed alone (best %.3f)",
		r.VerdictBeside.Median, r.VerdictBeside.N, r.MainShare(), best)
}

// WriteThreadSweep prints the sweep as a table with its recommendation.
func WriteThreadSweep(w io.Writer, s *ThreadSweep) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "guard threads\tmain decode share\t(range)\tverdict alone ms\t(n)\tverdict beside decode ms\t(n)\t(range)\t\n")
	for _, r := range s.Rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%d\terror: %s\t\t\t\t\t\t\t\n", r.Threads, r.Error)
			continue
		}
		lo, hi := r.ShareRange()
		beside, n, rng := "-", "0", "-"
		if r.VerdictBeside.N > 0 {
			beside = fmt.Sprintf("%.0f", r.VerdictBeside.Median)
			n = fmt.Sprint(r.VerdictBeside.N)
			rng = fmt.Sprintf("%.0f-%.0f", r.VerdictBeside.Min, r.VerdictBeside.Max)
		}
		fmt.Fprintf(tw, "%d\t%.3f\t%.3f-%.3f\t%.0f\t%d\t%s\t%s\t%s\t\n", r.Threads, r.MainShare(), lo, hi,
			r.VerdictAlone.Median, r.VerdictAlone.N, beside, n, rng)
	}
	tw.Flush()
	if s.Recommended > 0 {
		fmt.Fprintf(w, "recommendation: guard threads %d: %s\n", s.Recommended, s.Reason)
	} else if s.Reason != "" {
		fmt.Fprintf(w, "recommendation: none: %s\n", s.Reason)
	}
}

// SweepEnv is what a thread sweep measures with: a guard server started
// with a thread count, and the main model's decode speed.
type SweepEnv interface {
	// StartGuard starts the guard with threads; stop ends it.
	StartGuard(ctx context.Context, threads int) (g SweepGuard, stop func(), err error)
	// MainDecode generates one answer on the main model and returns its
	// decode speed in tokens per second.
	MainDecode(ctx context.Context) (float64, error)
}

// SweepGuard answers one verdict and says how long it took.
type SweepGuard interface {
	Verdict(ctx context.Context) (time.Duration, error)
}

// RunThreadSweep measures every thread count: samples verdicts alone,
// samples main answers alone, then samples main answers while the guard
// answers verdicts back to back (every verdict that ends while the main
// model decodes is a sample beside it).
func RunThreadSweep(ctx context.Context, env SweepEnv, threads []int, samples int) (*ThreadSweep, error) {
	if len(threads) == 0 {
		return nil, errors.New("bench: thread sweep: no thread counts")
	}
	samples = max(samples, 1)
	res := &ThreadSweep{}
	for _, t := range threads {
		if t <= 0 {
			return nil, fmt.Errorf("bench: thread sweep: thread count %d", t)
		}
		row := ThreadRow{Threads: t}
		if err := sweepRow(ctx, env, &row, samples); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			row.Error = err.Error()
		}
		res.Rows = append(res.Rows, row)
	}
	res.Recommended, res.Reason = RecommendThreads(res.Rows)
	return res, nil
}

func sweepRow(ctx context.Context, env SweepEnv, row *ThreadRow, samples int) error {
	g, stop, err := env.StartGuard(ctx, row.Threads)
	if err != nil {
		return err
	}
	defer stop()
	var alone, mainAlone []float64
	for range samples {
		d, err := g.Verdict(ctx)
		if err != nil {
			return fmt.Errorf("verdict alone: %w", err)
		}
		alone = append(alone, ms(d))
	}
	for range samples {
		v, err := env.MainDecode(ctx)
		if err != nil {
			return fmt.Errorf("main model alone: %w", err)
		}
		mainAlone = append(mainAlone, v)
	}
	// Beside: verdicts back to back for as long as the main model decodes.
	bctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var beside []float64
	decoding := true
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for bctx.Err() == nil {
			d, err := g.Verdict(bctx)
			mu.Lock()
			if err == nil && decoding {
				beside = append(beside, ms(d))
			}
			mu.Unlock()
		}
	}()
	var mainBeside []float64
	var derr error
	for range samples {
		v, err := env.MainDecode(ctx)
		if err != nil {
			derr = fmt.Errorf("main model beside the guard: %w", err)
			break
		}
		mainBeside = append(mainBeside, v)
	}
	mu.Lock()
	decoding = false
	mu.Unlock()
	cancel()
	wg.Wait()
	if derr != nil {
		return derr
	}
	row.VerdictAlone, row.MainAlone = summarize(alone), summarize(mainAlone)
	row.MainBeside, row.VerdictBeside = summarize(mainBeside), summarize(beside)
	return nil
}

// SweepThreads runs a guard thread sweep on this machine: o.Model as the
// guard on the CPU (o.Binary, one server per thread count) beside the
// main model at o.MainURL (or a CPU llama-server of o.Model when none is
// given, which measures the guard against itself), with mainTokens per
// main answer.
func SweepThreads(ctx context.Context, o Options, threads []int, samples, mainTokens int) (*ThreadSweep, error) {
	o.defaults()
	if o.Model == "" || o.Binary == "" {
		return nil, errors.New("bench: thread sweep: a guard model and a llama-server are needed")
	}
	r := &runner{o: o, proto: guardProtocol(o.Model, o.Protocol)}
	main, err := r.openMain(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: thread sweep: main model: %w", err)
	}
	defer main.close()
	return RunThreadSweep(ctx, &serverSweep{r: r, main: main, tokens: max(mainTokens, 16)}, threads, samples)
}

// serverSweep is the real SweepEnv: guard servers started by the
// supervisor on the CPU, the main model through its endpoint.
type serverSweep struct {
	r      *runner
	main   *endpoint
	tokens int
}

func (s *serverSweep) StartGuard(ctx context.Context, threads int) (SweepGuard, func(), error) {
	o := s.r.o
	o.Threads = threads
	rr := &runner{o: o, proto: s.r.proto}
	ep, err := rr.open(ctx, devices.Device{Name: "none"}, "")
	if err != nil {
		return nil, nil, err
	}
	// One unmeasured verdict loads the weights and warms the cache.
	if _, _, err := ep.srv.verdict(ctx, 0); err != nil {
		ep.close()
		return nil, nil, err
	}
	return &serverGuard{ep: ep}, ep.close, nil
}

func (s *serverSweep) MainDecode(ctx context.Context) (float64, error) {
	return s.main.decode(ctx, s.tokens)
}

type serverGuard struct {
	ep *endpoint
	mu sync.Mutex
	i  int
}

func (g *serverGuard) Verdict(ctx context.Context) (time.Duration, error) {
	g.mu.Lock()
	g.i++
	i := g.i
	g.mu.Unlock()
	d, _, err := g.ep.srv.verdict(ctx, i)
	return d, err
}
