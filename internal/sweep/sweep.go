package sweep

import (
	"context"
	"fmt"
	"time"
)

// Config is one sweep.
type Config struct {
	Model  string
	Sets   []Set
	Bench  *Engine // nil: no llama-bench runs
	Server *Engine // nil: no llama-server runs (TTFT is then derived from pp)
	BenchOptions
	ServerOptions
	// Progress, if not nil, is told when each run starts.
	Progress func(set, engine string)
}

// TTFTSource says where a time to first token came from.
type TTFTSource string

// TTFT sources.
const (
	TTFTServer     TTFTSource = "server"     // measured: one streamed llama-server completion of the fixed prompt
	TTFTPPDerived  TTFTSource = "pp-derived" // llama-bench prompt tokens / pp speed (no sampling, no HTTP)
	TTFTUnmeasured TTFTSource = ""
)

// MemorySource says where a memory figure came from.
type MemorySource string

// Memory sources.
const (
	MemoryServerLog  MemorySource = "server-log"    // model + KV + compute buffers from llama-server's load log
	MemoryBenchModel MemorySource = "bench-weights" // llama-bench model_size: weights only
)

// SpeedSource says where pp/tg speeds came from.
type SpeedSource string

// Speed sources.
const (
	SpeedBench  SpeedSource = "bench"  // llama-bench -p/-n averages
	SpeedServer SpeedSource = "server" // one llama-server completion's timings (sets that skip llama-bench)
)

// Result is one set's measurements.
type Result struct {
	Set          Set           `json:"set"`
	PP           float64       `json:"pp_tps,omitempty"` // prompt processing, tokens/s (llama-bench)
	TG           float64       `json:"tg_tps,omitempty"` // generation, tokens/s (llama-bench)
	PPTokens     int           `json:"pp_tokens,omitempty"`
	SpeedSource  SpeedSource   `json:"speed_source,omitempty"`
	TTFT         time.Duration `json:"ttft_ns,omitempty"`
	TTFTSource   TTFTSource    `json:"ttft_source,omitempty"`
	MemoryBytes  uint64        `json:"memory_bytes,omitempty"`
	MemorySource MemorySource  `json:"memory_source,omitempty"`
	Bench        []BenchRow    `json:"bench,omitempty"`
	Server       *ServerResult `json:"server,omitempty"`
	Err          string        `json:"error,omitempty"`
	// Ratios against the first set (this / first); 0 when either is missing.
	PPRatio   float64 `json:"pp_ratio,omitempty"`
	TGRatio   float64 `json:"tg_ratio,omitempty"`
	TTFTRatio float64 `json:"ttft_ratio,omitempty"`
}

// Run measures every set in order. A set that fails records its error and
// the sweep goes on; Run fails only when ctx ends or there is nothing to
// run.
func Run(ctx context.Context, c Config) ([]Result, error) {
	if len(c.Sets) == 0 {
		return nil, ErrNoSets
	}
	if c.Bench == nil && c.Server == nil {
		return nil, fmt.Errorf("sweep: neither llama-bench nor llama-server given")
	}
	progress := c.Progress
	if progress == nil {
		progress = func(string, string) {}
	}
	out := make([]Result, 0, len(c.Sets))
	for _, s := range c.Sets {
		r := Result{Set: s}
		if c.Bench != nil && !s.SkipBench {
			progress(s.Name, "llama-bench")
			rows, err := RunBench(ctx, *c.Bench, c.Model, s, c.BenchOptions)
			if err != nil {
				r.Err = err.Error()
			} else {
				r.Bench = rows
				r.PP, r.TG, r.PPTokens = Speeds(rows)
				r.SpeedSource = SpeedBench
				if len(rows) > 0 {
					r.MemoryBytes, r.MemorySource = rows[0].ModelSize, MemoryBenchModel
				}
				if r.PP > 0 {
					r.TTFT = time.Duration(float64(r.PPTokens) / r.PP * float64(time.Second))
					r.TTFTSource = TTFTPPDerived
				}
			}
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if c.Server != nil {
			progress(s.Name, "llama-server")
			sr, err := RunServer(ctx, *c.Server, c.Model, s, c.ServerOptions)
			if err != nil {
				if r.Err != "" {
					r.Err += "; "
				}
				r.Err += err.Error()
			} else {
				r.Server = sr
				r.TTFT, r.TTFTSource = sr.TTFT, TTFTServer
				if r.SpeedSource == "" && sr.PromptMS > 0 {
					r.PP, r.PPTokens = float64(sr.PromptN)/sr.PromptMS*1000, sr.PromptN
					r.TG, r.SpeedSource = sr.PredictedPS, SpeedServer
				}
				if t := sr.Load.Total(); t > 0 {
					r.MemoryBytes, r.MemorySource = t, MemoryServerLog
				}
			}
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		out = append(out, r)
	}
	Ratios(out)
	return out, nil
}

// Ratios fills each result's ratios against the first result.
func Ratios(rs []Result) {
	if len(rs) == 0 {
		return
	}
	base := rs[0]
	ratio := func(a, b float64) float64 {
		if a <= 0 || b <= 0 {
			return 0
		}
		return a / b
	}
	for i := range rs {
		rs[i].PPRatio = ratio(rs[i].PP, base.PP)
		rs[i].TGRatio = ratio(rs[i].TG, base.TG)
		rs[i].TTFTRatio = ratio(float64(rs[i].TTFT), float64(base.TTFT))
	}
}
