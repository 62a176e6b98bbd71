// Package bench is the sentinel benchmark: it measures where a small
// guard model runs best on this machine (CPU, integrated GPU, second GPU)
// on the same model, quant and prompts for every device, and turns the
// measured device/CPU ratio into a placement recommendation. AutoPlace is
// its short version, run by `aegis serve --guard-device auto` and cached.
//
// Prefill (ppN) and decode (tgN) speeds are reported twice, each labelled
// by its source:
//
//   - the device's own speed, measured by llama-bench with the server's
//     settings (threads, default batch 2048/512, flash attention auto, the
//     same -p/-n, all layers on the device, decode from an empty context),
//     one repetition per round, interleaved with the server's rounds; when
//     llama-bench is absent or fails, the server's timings stand in and
//     are labelled so;
//   - the served speed, from llama-server's own timings of /completion
//     requests (prompt_per_second, predicted_per_second): what a guard on
//     this device delivers. Time to verdict is always the server's, since
//     that is what users wait for.
//
// The two differ by llama-server's own work per generated token, which
// llama-bench does not do: each decode is handed to the task queue's
// worker thread and back, then sampled and booked. It costs tens of
// microseconds per token whatever the server flags (measured on the
// testbed; the numbers and the flags tried are in commit 428f69c). That is a large share of a 260K-parameter toy model's
// token and under 1% of a 1-3B guard's. The report shows it per device
// as ServerOverheadUS, next to llama-bench's own spread on the same scale.
//
// On a shared machine other processes only slow a run down, and they slow
// the two tools differently: the server sleeps between requests and gets
// a CPU as soon as it wakes, llama-bench is CPU-bound and gets preempted.
// Comparisons between the tools (ServedShare, ServerOverheadUS) therefore
// use the fastest round of each, not the medians.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/llamaserver"
	"github.com/aegis-sentinel/aegis/internal/supervisor"
)

// Options configure a sentinel benchmark run.
type Options struct {
	Binary     string // llama-server; needed unless every device has a URL
	LlamaBench string // measures the devices' own speeds; "" puts the servers' timings in their place
	Model      string // GGUF path
	Devices    []devices.Device
	// URLs benchmarks already running servers instead of starting them,
	// keyed by device label ("CPU", "Vulkan0"). Failure-path runs need
	// own servers and are skipped for URL devices.
	URLs map[string]string
	// MainURL is the main model's server for the interference test; ""
	// starts a CPU server for it (with Binary and Model).
	MainURL string
	// MainKind is MainURL's API (auto: detected) and MainModel the model
	// to ask there (Ollama and OpenAI servers; "" takes the one they list
	// first).
	MainKind  MainKind
	MainModel string

	Threads   int   // -t for servers and llama-bench; 0 = devices.GuardThreads of the physical cores, as serve runs the guard
	CtxSize   int   // default 2048
	Reps      int   // repetitions per speed test (server and llama-bench); default 5
	Verdicts  int   // time-to-verdict samples; default 5
	PP        []int // default 512, 1024; {0} runs no prefill test (as llama-bench -p 0)
	TG        []int // default 16, 32, 64
	Stability int   // repeated short placement runs; default 3, <0 skips

	NoInterference bool
	NoFailurePath  bool

	// EvalFile is a labelled set (JSONL: text, unsafe, optional user) the
	// guard judges in Protocol ("" or auto: detected from the model) for
	// its false positives and negatives.
	EvalFile string
	Protocol string
	// Repairs is how many failure-path samples to take on the main model's
	// server (finding -> first repaired byte); 0 means 5, <0 skips.
	Repairs int

	// Progress is called after each step; nil means silent.
	Progress func(done, total int, step string)
	// Root prefixes /proc and /sys for load and power readings.
	Root string

	// afterRound, when set (by tests), runs after each speed round of a
	// device, so a test can interleave its own measurements.
	afterRound func(device string, round int)
}

func (o *Options) defaults() {
	if o.Threads <= 0 {
		o.Threads = devices.GuardThreads(PhysicalCores())
	}
	if o.CtxSize <= 0 {
		o.CtxSize = 2048
	}
	if o.Reps <= 0 {
		o.Reps = 5
	}
	if o.Verdicts <= 0 {
		o.Verdicts = 5
	}
	if len(o.PP) == 0 {
		o.PP = []int{512, 1024}
	}
	o.PP = slices.DeleteFunc(slices.Clone(o.PP), func(n int) bool { return n <= 0 })
	if len(o.TG) == 0 {
		o.TG = []int{16, 32, 64}
	}
	if o.Stability == 0 {
		o.Stability = 3
	}
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Repairs == 0 {
		o.Repairs = 5
	}
	hasCPU := false
	for _, d := range o.Devices {
		hasCPU = hasCPU || d.IsCPU()
	}
	if !hasCPU { // the CPU is the baseline every ratio needs
		o.Devices = append([]devices.Device{{Name: "none"}}, o.Devices...)
	}
}

// Speed sources of DeviceResult.SpeedSource.
const (
	SourceLlamaBench = "llama-bench"
	SourceServer     = "llama-server timings"
)

// DeviceResult is everything measured on one device.
type DeviceResult struct {
	Device  string `json:"device"`
	Backend string `json:"backend"`
	Source  string `json:"source"` // "own server" or the --url
	Error   string `json:"error,omitempty"`
	Build   string `json:"build,omitempty"` // /props build_info of a --url server
	// Skipped names tests the server could not run.
	Skipped []string `json:"skipped,omitempty"`

	// Speeds in tokens/s by test name (pp512, tg16, ...), over the rounds.
	// DeviceSpeed is the device's own speed, from SpeedSource: "llama-bench"
	// (one repetition per round with the server's settings) or
	// "llama-server timings" when llama-bench is absent or failed
	// (LlamaBenchError says why). Served is llama-server's own timings:
	// what a guard on this device delivers.
	DeviceSpeed     map[string]Stat `json:"device_speed"`
	SpeedSource     string          `json:"speed_source"`
	LlamaBenchError string          `json:"llama_bench_error,omitempty"`
	Served          map[string]Stat `json:"served_speed"`
	// ServedShare is served / device speed per test, and ServerOverheadUS
	// llama-server's time per generated token beyond bare decoding
	// (1e6/served - 1e6/device, tg tests), both from the fastest round of
	// each tool. Set only when the device speed is llama-bench's.
	// ServerOverheadNoiseUS is llama-bench's own spread on the same scale
	// (1e6/median - 1e6/fastest round of the device speed): an overhead
	// smaller than that is not resolved.
	ServedShare           map[string]float64 `json:"served_share,omitempty"`
	ServerOverheadUS      map[string]float64 `json:"server_overhead_us_per_token,omitempty"`
	ServerOverheadNoiseUS map[string]float64 `json:"server_overhead_noise_us_per_token,omitempty"`

	// VerdictMS is the wall time to a verdict after a guard prompt of
	// VerdictPromptTokens tokens: in the model's own protocol (Report's
	// Protocol), or schema-constrained for a general model.
	VerdictMS           Stat `json:"verdict_ms"`
	VerdictPromptTokens int  `json:"verdict_prompt_tokens"`

	// Load while the guard answers verdicts back to back.
	Load Load `json:"load"`
	// Power during the tg runs; TokPerJoule and WhPer1kTok when known.
	Power       Power   `json:"power"`
	TokPerJoule float64 `json:"tok_per_joule,omitempty"`
	WhPer1kTok  float64 `json:"wh_per_1k_tok,omitempty"`

	// Interference: the main model's decode speed with the guard busy on
	// this device, as a share of its speed alone (1 = no slowdown).
	MainTokS  float64 `json:"main_tok_s,omitempty"`
	MainShare float64 `json:"main_share,omitempty"`
	// MainBeside is every main-model answer's speed with the guard busy,
	// and MainShareRange the slowest and fastest of them over the median
	// alone: the spread of the interference.
	MainBeside     Stat       `json:"main_beside_tok_s,omitzero"`
	MainShareRange [2]float64 `json:"main_share_range,omitzero"`
	// Failure path, with a hot CPU standby: kill -9 of this device's
	// server → next good verdict (RecoveryMS) and → this device serving
	// again (RestartMS); RecoveryLost counts requests that failed, and
	// RecoveryErrors holds the first few different errors they failed
	// with.
	RecoveryMS     float64  `json:"recovery_ms,omitempty"`
	RestartMS      float64  `json:"restart_ms,omitempty"`
	RecoveryLost   int      `json:"recovery_lost"`
	RecoveryErrors []string `json:"recovery_errors,omitempty"`
	RecoveryTested bool     `json:"recovery_tested"`

	// Ratio is CPU time-to-verdict / this device's (>1 = faster than the
	// CPU); TGRatio the same for the served tg64 speed.
	Ratio          float64 `json:"ratio"`
	TGRatio        float64 `json:"tg_ratio"`
	Unstable       bool    `json:"unstable"`
	Interpretation string  `json:"interpretation"`
	// Implausible says which figures of this device were left out because
	// they cannot be true, and why (see flagImpossible).
	Implausible []string `json:"implausible,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	Model string `json:"model"`
	// Protocol is the guard protocol time to verdict was asked in.
	Protocol       string         `json:"protocol"`
	ModelMiB       float64        `json:"model_mib"`
	ServerVersion  string         `json:"server_version,omitempty"`
	Threads        int            `json:"threads"`
	Reps           int            `json:"reps"`
	Started        time.Time      `json:"started"`
	Duration       time.Duration  `json:"duration_ns"`
	MainAloneTokS  float64        `json:"main_alone_tok_s,omitempty"`
	MainAlone      Stat           `json:"main_alone,omitzero"` // every answer's speed alone
	Devices        []DeviceResult `json:"devices"`
	Stability      []string       `json:"stability_choices,omitempty"`
	Stable         bool           `json:"stable"`
	Recommendation string         `json:"recommendation"`
	Reason         string         `json:"reason"`
	Settings       string         `json:"settings"`
	// GuardEval is the guard on the labelled set (--eval), Repair the
	// failure path's latency.
	GuardEval *GuardEval `json:"guard_eval,omitempty"`
	Repair    *Repair    `json:"repair,omitempty"`
	// LoadAvg is /proc/loadavg's 1-minute value at the start and the end:
	// on a shared machine it says how far to trust the numbers.
	LoadAvg [2]float64 `json:"loadavg"`
}

func loadAvg(root string) float64 {
	b, err := os.ReadFile(filepath.Join(root, "proc", "loadavg"))
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

type runner struct {
	o     Options
	proto llm.Protocol // the guard's protocol for time to verdict
	done  int
	all   int
}

func (r *runner) step(what string) {
	r.done++
	if r.o.Progress != nil {
		r.o.Progress(r.done, r.all, what)
	}
}

// Run performs the full benchmark. Errors on one device are recorded in
// its result; Run fails only when the CPU baseline cannot be measured.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	if o.Model == "" {
		return nil, errors.New("bench: a model is needed")
	}
	r := &runner{o: o, proto: guardProtocol(o.Model, o.Protocol)}
	// steps: per device server+speed+verdict+interference+failure+llama-bench
	r.all = len(o.Devices)*5 + 2 + max(o.Stability, 0)
	if o.EvalFile != "" {
		r.all++
	}
	if o.Repairs > 0 {
		r.all++
	}
	rep := &Report{Model: o.Model, Threads: o.Threads, Reps: o.Reps, Started: time.Now(), Protocol: r.proto.String()}
	rep.LoadAvg[0] = loadAvg(o.Root)
	if fi, err := os.Stat(o.Model); err == nil {
		rep.ModelMiB = float64(fi.Size()) / (1 << 20)
	}
	if o.Binary != "" {
		rep.ServerVersion = ServerVersion(ctx, o.Binary)
	}
	pp := joinInts(o.PP)
	if pp == "" {
		pp = "0"
	}
	rep.Settings = fmt.Sprintf("threads %d, batch 2048/ubatch 512, flash attention auto (defaults of both tools), -p %s, -n %s, decode from an empty context, %d rounds, server: greedy sampling (samplers [top_k], top_k 1), no prompt cache, ctx %d",
		o.Threads, pp, joinInts(o.TG), o.Reps, o.CtxSize)

	// The main model for the interference test.
	var main *endpoint
	if !o.NoInterference {
		m, err := r.openMain(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench: main model server: %w", err)
		}
		defer m.close()
		main = m
		if st, err := r.mainSpeeds(ctx, main); err == nil {
			rep.MainAlone, rep.MainAloneTokS = st, st.Median
		}
	}
	r.step("main model alone")

	for _, d := range o.Devices {
		res := r.device(ctx, d, main, rep.MainAloneTokS)
		rep.Devices = append(rep.Devices, res)
	}
	r.guardRows(ctx, rep, main)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var cpu *DeviceResult
	for i := range rep.Devices {
		if rep.Devices[i].Device == "CPU" {
			cpu = &rep.Devices[i]
		}
	}
	if cpu == nil || cpu.Error != "" {
		msg := "not measured"
		if cpu != nil {
			msg = cpu.Error
		}
		rep.LoadAvg[1] = loadAvg(o.Root)
		return rep, fmt.Errorf("bench: CPU baseline failed: %s", msg)
	}
	for i := range rep.Devices {
		interpret(&rep.Devices[i], cpu)
	}
	rep.Recommendation, rep.Reason = recommend(rep.Devices)
	r.step("interpretation")

	// Device-selection stability: repeated short placements from fresh
	// server starts choose the same device.
	if o.Stability > 0 && o.Binary != "" {
		for range o.Stability {
			p, err := measurePlacement(ctx, AutoOptions{Binary: o.Binary, Model: o.Model, Devices: o.Devices, Threads: o.Threads})
			choice := "error"
			if err == nil {
				choice = p.Device
			}
			rep.Stability = append(rep.Stability, choice)
			r.step("stability run")
		}
		rep.Stable = true
		for _, c := range rep.Stability {
			rep.Stable = rep.Stable && c == rep.Stability[0] && c != "error"
		}
	}
	rep.flagImpossible()
	rep.Duration = time.Since(rep.Started)
	rep.LoadAvg[1] = loadAvg(o.Root)
	return rep, nil
}

// endpoint is a server under test: its own (through the supervisor) or
// given by URL.
type endpoint struct {
	srv server
	sup *supervisor.Supervisor
	url string
	// main is set on a main model given by URL: its own API, which may be
	// Ollama's or an OpenAI-compatible one.
	main mainModel
}

func (e *endpoint) pid() int {
	if e.sup == nil {
		return 0
	}
	st, _ := e.sup.Status()
	if len(st.PIDs) == 0 {
		return 0
	}
	return st.PIDs[0]
}

func (e *endpoint) close() {
	if e.sup != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = e.sup.Stop(ctx)
	}
}

func (r *runner) open(ctx context.Context, d devices.Device, url string) (*endpoint, error) {
	if url != "" {
		return &endpoint{srv: server{base: strings.TrimRight(url, "/"), c: llamaserver.NewClient(2 * time.Minute), proto: r.proto}, url: url}, nil
	}
	if r.o.Binary == "" {
		return nil, errors.New("no --llama-server and no --url for this device")
	}
	sup := supervisor.New(supervisor.Config{
		Name: "bench-" + d.Label(), Binary: r.o.Binary, Model: r.o.Model, Chain: []devices.Device{d},
		NoCPUFallback: true, CtxSize: r.o.CtxSize, Threads: r.o.Threads, HealthInterval: 200 * time.Millisecond,
		BackoffBase: 100 * time.Millisecond, StartTimeout: 2 * time.Minute,
	})
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := sup.Start(sctx); err != nil {
		_ = sup.Stop(context.Background())
		return nil, err
	}
	return &endpoint{srv: server{c: sup.HTTPClient(2 * time.Minute), proto: r.proto}, sup: sup, url: sup.URL()}, nil
}

// openMain opens the main model's server: MainURL in its own API, or a
// llama-server started on the CPU.
func (r *runner) openMain(ctx context.Context) (*endpoint, error) {
	if r.o.MainURL == "" {
		return r.open(ctx, devices.Device{Name: "none"}, "")
	}
	ep, err := r.open(ctx, devices.Device{Name: "none"}, r.o.MainURL)
	if err != nil {
		return nil, err
	}
	m, err := openMain(ctx, r.o.MainURL, r.o.MainKind, r.o.MainModel, ep.srv.c)
	if err != nil {
		return nil, err
	}
	ep.main = m
	return ep, nil
}

// decode generates n tokens on the main model and returns its decode
// speed: from its own counters where its API has them (llama-server's
// timings, Ollama's eval_count and eval_duration), else timed from its
// stream.
func (e *endpoint) decode(ctx context.Context, n int) (float64, error) {
	if e.main != nil {
		return e.main.decode(ctx, n)
	}
	t, err := e.srv.generate(ctx, 1, n)
	if err != nil {
		return 0, err
	}
	return t.PredictedPerSecond, nil
}

// shareOf is the main model's speed beside the busy guard as a share of
// its median speed alone, with the slowest and fastest answer's share.
func shareOf(aloneMedian float64, beside Stat) (float64, [2]float64) {
	if aloneMedian <= 0 || beside.N == 0 {
		return 0, [2]float64{}
	}
	return beside.Median / aloneMedian, [2]float64{beside.Min / aloneMedian, beside.Max / aloneMedian}
}

// interferenceSamples is the fewest main-model answers per interference
// measurement: fewer say nothing about a few percent of slowdown.
const interferenceSamples = 5

// mainSpeeds is the main model's tg64 speed over max(Reps, 5) answers.
func (r *runner) mainSpeeds(ctx context.Context, main *endpoint) (Stat, error) {
	var v []float64
	for range max(r.o.Reps, interferenceSamples) {
		t, err := main.decode(ctx, 64)
		if err != nil {
			return Stat{}, err
		}
		v = append(v, t)
	}
	return summarize(v), nil
}

func (r *runner) device(ctx context.Context, d devices.Device, main *endpoint, mainAlone float64) DeviceResult {
	res := DeviceResult{Device: d.Label(), Backend: string(devices.BackendOf(d.Name)), Source: "own server",
		DeviceSpeed: map[string]Stat{}, Served: map[string]Stat{}}
	url := r.o.URLs[d.Label()]
	if url != "" {
		res.Source = url
	}
	first := r.done
	fail := func(err error) DeviceResult {
		res.Error = err.Error()
		for r.done < first+5 { // keep the progress bar honest
			r.step(d.Label() + " skipped")
		}
		return res
	}
	ep, err := r.open(ctx, d, url)
	if err != nil {
		return fail(err)
	}
	defer ep.close()
	r.step(d.Label() + " server up")

	// Warm-up and a token pool for exact-length prompts.
	toks, err := ep.srv.tokenize(ctx, guardPrompt(0)+guardPrompt(1))
	if err != nil {
		return fail(err)
	}
	if _, err := ep.srv.generate(ctx, toks[0], 8); err != nil {
		return fail(err)
	}
	// A server's slot may hold less than the largest pp test (a
	// --url server started with -np 4 -c 2048 has 512 per slot).
	pps := r.o.PP
	if nCtx, build, err := ep.srv.props(ctx); err == nil {
		if res.Source != "own server" && build != "" {
			res.Build = build
		}
		pps = nil
		for _, n := range r.o.PP {
			if nCtx == 0 || n+8 <= nCtx {
				pps = append(pps, n)
			} else {
				res.Skipped = append(res.Skipped, fmt.Sprintf("pp%d (slot context %d)", n, nCtx))
			}
		}
	}
	pool := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = toks[i%len(toks)]
		}
		return out
	}
	// Speed tests: each round runs the server's tests and llama-bench
	// -r 1 with the same settings, in alternating order, so both tools see
	// the same stretch of background load.
	samples := map[string][]float64{}
	lbSamples := map[string][]float64{}
	var tgTokens int
	var power Power
	lbRound := func() {
		if r.o.LlamaBench == "" || res.LlamaBenchError != "" {
			return
		}
		rows, err := runLlamaBench(ctx, r.o.LlamaBench, r.o.Model, d, r.o.Threads, 1, r.o.PP, r.o.TG)
		if err != nil {
			res.LlamaBenchError = err.Error()
			return
		}
		for _, row := range rows {
			lbSamples[row.Test()] = append(lbSamples[row.Test()], row.AvgTS)
		}
	}
	for i := range r.o.Reps {
		if i%2 == 1 {
			lbRound()
		}
		// Each test is warmed up as llama-bench warms up its own: an
		// unmeasured run of the same prompt size before each ppN, a short
		// generation before the tgN tests. A 64-token warm-up alone left
		// the server's pp512 ~30% slow on the testbed.
		for _, n := range pps {
			if _, err := ep.srv.prefill(ctx, pool(n)); err != nil {
				return fail(err)
			}
			t, err := ep.srv.prefill(ctx, pool(n))
			if err != nil {
				return fail(err)
			}
			k := fmt.Sprintf("pp%d", n)
			samples[k] = append(samples[k], t.PromptPerSecond)
		}
		if _, err := ep.srv.generate(ctx, toks[0], 2); err != nil {
			return fail(err)
		}
		pm := startPower(ctx, r.o.Root, d)
		for _, n := range r.o.TG {
			t, err := ep.srv.generate(ctx, toks[0], n)
			if err != nil {
				return fail(err)
			}
			k := fmt.Sprintf("tg%d", n)
			samples[k] = append(samples[k], t.PredictedPerSecond)
			tgTokens += t.PredictedN
		}
		p := pm.stop(ctx)
		power.Source = p.Source
		power.Joules += p.Joules
		for k, v := range p.Domains {
			if power.Domains == nil {
				power.Domains = map[string]float64{}
			}
			power.Domains[k] += v
		}
		if i%2 == 0 {
			lbRound()
		}
		if r.o.afterRound != nil {
			r.o.afterRound(d.Label(), i)
		}
	}
	for k, v := range samples {
		res.Served[k] = summarize(v)
	}
	res.SpeedSource = SourceServer
	res.DeviceSpeed = res.Served
	if res.LlamaBenchError == "" && len(lbSamples) > 0 {
		res.SpeedSource = SourceLlamaBench
		res.DeviceSpeed = map[string]Stat{}
		res.ServedShare, res.ServerOverheadUS, res.ServerOverheadNoiseUS = map[string]float64{}, map[string]float64{}, map[string]float64{}
		for k, v := range lbSamples {
			dev := summarize(v)
			res.DeviceSpeed[k] = dev
			srv, ok := res.Served[k]
			if !ok || dev.Max <= 0 || srv.Max <= 0 {
				continue
			}
			res.ServedShare[k] = srv.Max / dev.Max
			if strings.HasPrefix(k, "tg") {
				res.ServerOverheadUS[k] = 1e6/srv.Max - 1e6/dev.Max
				res.ServerOverheadNoiseUS[k] = 1e6/dev.Median - 1e6/dev.Max
			}
		}
	}
	if power.Source == powerRAPL || power.Source == powerNvidiaSMI {
		var tgSeconds float64
		for _, n := range r.o.TG {
			if st := res.Served[fmt.Sprintf("tg%d", n)]; st.Mean > 0 {
				tgSeconds += float64(n*st.N) / st.Mean
			}
		}
		if tgSeconds > 0 {
			power.Watts = power.Joules / tgSeconds
		}
		res.TokPerJoule = float64(tgTokens) / power.Joules
		res.WhPer1kTok = power.Joules / 3600 / float64(tgTokens) * 1000
	}
	res.Power = power
	r.step(d.Label() + " pp/tg")

	// Time to verdict, with the CPU load it causes.
	ls := startLoad(r.o.Root, ep.pid())
	var ms []float64
	for i := range r.o.Verdicts {
		dur, t, err := ep.srv.verdict(ctx, i)
		if err != nil {
			return fail(err)
		}
		ms = append(ms, float64(dur.Microseconds())/1000)
		res.VerdictPromptTokens = t.PromptN + t.CacheN
	}
	res.Load = ls.stop()
	res.VerdictMS = summarize(ms)
	r.step(d.Label() + " time to verdict")

	if main != nil && mainAlone > 0 {
		var st Stat
		if _, err := r.withBusyGuard(ctx, ep, func() (float64, error) {
			var err error
			st, err = r.mainSpeeds(ctx, main)
			return st.Median, err
		}); err == nil {
			res.MainTokS, res.MainBeside = st.Median, st
			res.MainShare, res.MainShareRange = shareOf(mainAlone, st)
		} else {
			res.Error = "interference: " + err.Error()
		}
	}
	r.step(d.Label() + " interference")

	// The measured server is stopped before the failure path and
	// llama-bench so they do not compete with it.
	ownServer := ep.sup != nil
	ep.close()
	ep.sup = nil
	if !r.o.NoFailurePath && ownServer {
		fb, rs, lost, errs, err := r.failurePath(ctx, d)
		res.RecoveryMS, res.RestartMS, res.RecoveryLost, res.RecoveryErrors, res.RecoveryTested = fb, rs, lost, errs, err == nil
		if err != nil {
			res.Error = "failure path: " + err.Error()
		}
	}
	r.step(d.Label() + " failure path")

	return res
}

// withBusyGuard runs f while the guard answers verdicts back to back.
func (r *runner) withBusyGuard(ctx context.Context, ep *endpoint, f func() (float64, error)) (float64, error) {
	bctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; bctx.Err() == nil; i++ {
			_, _, _ = ep.srv.verdict(bctx, i)
		}
	}()
	time.Sleep(50 * time.Millisecond) // let the guard get busy
	v, err := f()
	cancel()
	wg.Wait()
	return v, err
}

// failurePath starts the device's server with a hot CPU standby, kills
// the device's server with SIGKILL while verdicts run back to back, and
// returns the time from the kill to the next good verdict (served by the
// standby, through the supervisor's failover client), the time until the
// device itself serves again, and how many requests failed.
func (r *runner) failurePath(ctx context.Context, d devices.Device) (fallbackMS, restartMS float64, lost int, errs []string, err error) {
	sup := supervisor.New(supervisor.Config{
		Name: "bench-failure-" + d.Label(), Binary: r.o.Binary, Model: r.o.Model,
		Chain: []devices.Device{d, {Name: "none"}}, HotStandby: true, CtxSize: r.o.CtxSize, Threads: r.o.Threads,
		HealthInterval: 200 * time.Millisecond, BackoffBase: 100 * time.Millisecond, StartTimeout: 2 * time.Minute,
	})
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = sup.Stop(sctx)
	}()
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := sup.Start(sctx); err != nil {
		return 0, 0, 0, nil, err
	}
	bothUp := func(st supervisor.Status) bool {
		return st.State == supervisor.StateReady && st.Children[1] == supervisor.ChildReady
	}
	if err := waitStatus(sctx, sup, bothUp); err != nil {
		return 0, 0, 0, nil, fmt.Errorf("waiting for the standby: %w", err)
	}
	st, _ := sup.Status()
	pid := st.PIDs[0]
	srv := server{c: sup.HTTPClient(time.Minute)}
	type result struct {
		end time.Time
		err error
	}
	results := make(chan result, 4096)
	bctx, stop := context.WithCancel(sctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; bctx.Err() == nil; i++ {
			_, _, err := srv.verdict(bctx, i)
			if bctx.Err() != nil {
				return
			}
			select {
			case results <- result{time.Now(), err}:
			default:
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		stop()
		wg.Wait()
		return 0, 0, 0, nil, fmt.Errorf("kill %d: %w", pid, err)
	}
	recovered := time.Duration(-1)
	for recovered < 0 {
		select {
		case res := <-results:
			if res.err != nil {
				lost++
				errs = noteError(errs, res.err)
			} else if res.end.After(killed) {
				recovered = res.end.Sub(killed)
			}
		case <-sctx.Done():
			stop()
			wg.Wait()
			return 0, 0, lost, errs, errors.New("no verdict after the kill")
		}
	}
	backOn := func(st supervisor.Status) bool {
		return st.State == supervisor.StateReady && st.PIDs[0] != pid && st.PIDs[0] != 0
	}
	werr := waitStatus(sctx, sup, backOn)
	restarted := time.Since(killed)
	stop()
	wg.Wait()
	for len(results) > 0 {
		if res := <-results; res.err != nil {
			lost++
			errs = noteError(errs, res.err)
		}
	}
	if werr != nil {
		return ms(recovered), 0, lost, errs, fmt.Errorf("device did not come back: %w", werr)
	}
	return ms(recovered), ms(restarted), lost, errs, nil
}

// noteError adds err's message to errs unless it is there or errs holds
// three already.
func noteError(errs []string, err error) []string {
	if len(errs) >= 3 || slices.Contains(errs, err.Error()) {
		return errs
	}
	return append(errs, err.Error())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func waitStatus(ctx context.Context, s *supervisor.Supervisor, cond func(supervisor.Status) bool) error {
	for {
		st, ch := s.Status()
		if cond(st) {
			return nil
		}
		if st.State == supervisor.StateDeterministic || st.State == supervisor.StateStopped {
			return fmt.Errorf("supervisor is %s: %v", st.State, st.Err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// interpret fills the ratios and the interpretation of d against cpu.
func interpret(d, cpu *DeviceResult) {
	if d.Error != "" && d.VerdictMS.N == 0 {
		d.Interpretation = "error"
		return
	}
	if d.Device == "CPU" {
		d.Ratio, d.TGRatio, d.Interpretation = 1, 1, VerdictBaseline
		return
	}
	if d.VerdictMS.Median > 0 {
		d.Ratio = cpu.VerdictMS.Median / d.VerdictMS.Median
	}
	if c, ok := cpu.Served["tg64"]; ok && c.Median > 0 {
		d.TGRatio = d.Served["tg64"].Median / c.Median
	}
	d.Unstable = d.VerdictMS.CV > UnstableCV || d.Served["tg64"].CV > UnstableCV
	d.Interpretation = Interpret(d.Ratio, d.Unstable)
}

// recommend picks the guard device: the fastest device the table calls at
// least plausible, else an about-equal device that leaves the CPU freer,
// else the CPU.
func recommend(ds []DeviceResult) (string, string) {
	best, bestRatio := "", 0.0
	var cpuLoad float64 = -1
	for _, d := range ds {
		if d.Device == "CPU" {
			cpuLoad = d.Load.SystemPct
		}
	}
	for _, d := range ds {
		switch d.Interpretation {
		case VerdictPlausible, VerdictUseful, VerdictStrong:
			if d.Ratio > bestRatio {
				best, bestRatio = d.Device, d.Ratio
			}
		}
	}
	if best != "" {
		return best, fmt.Sprintf("%s answers verdicts %.2fx as fast as the CPU", best, bestRatio)
	}
	for _, d := range ds {
		if d.Interpretation == VerdictEqual && cpuLoad >= 0 && d.Load.SystemPct >= 0 && d.Load.SystemPct < cpuLoad-20 {
			return d.Device, fmt.Sprintf("%s is about as fast as the CPU (%.2fx) and leaves it freer (%.0f%% vs %.0f%% busy)", d.Device, d.Ratio, d.Load.SystemPct, cpuLoad)
		}
	}
	return "CPU", "no device beats the CPU by the table's margin (>= 1.2x time to verdict)"
}

// PhysicalCores is the CPU's physical core count (1 when unknown).
func PhysicalCores() int {
	r, err := devices.Discover(context.Background(), devices.Options{NoPCIIDs: true})
	if err != nil || r.CPU.Cores < 1 {
		return 1
	}
	return r.CPU.Cores
}

// ServerVersion returns `llama-server --version`'s first line ("" when it
// fails).
func ServerVersion(ctx context.Context, binary string) string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, binary, "--version").CombinedOutput()
	for l := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(l, "version:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "version:"))
		}
	}
	return ""
}

// SiblingTool finds a llama.cpp tool next to the llama-server binary
// (llama-bench), or "".
func SiblingTool(server, name string) string {
	if server == "" {
		return ""
	}
	p := filepath.Join(filepath.Dir(server), name)
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
		return p
	}
	return ""
}
