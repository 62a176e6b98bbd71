package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/bench"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
)

func init() {
	benchSubcommands = append(benchSubcommands, func(stdio *IO) *cobra.Command {
		var (
			model, server, llamaBench, report, mainURL string
			mainKind, mainModel                        string
			sweep                                      []int
			sweepSamples, sweepTokens                  int
			evalFile, protocol                         string
			repairs                                    int
			devs, urls, envs                           []string
			asJSON, quick, auto, noLlamaBench          bool
			threads, reps, verdicts, stability         int
		)
		c := &cobra.Command{
			Use:   "sentinel",
			Short: "Measure where the guard model runs best (CPU vs. iGPU vs. second GPU)",
			Long: `sentinel runs the same model, quant and prompts on every device and measures
prefill (pp512, pp1024) and short decode (tg16/32/64) speeds, the time to a
verdict on a short conversation (from the server: what users wait for; asked
in the guard model's own protocol, or schema-constrained for a general model), the machine's CPU load while the guard answers, power where the machine
exposes it (RAPL, nvidia-smi), how much the guard slows the main model, the
time to recover when the guard's server is killed, whether repeated short
placements choose the same device, the failure path (from a failing finding
on the main model's streamed answer to the first byte of the repaired
answer, on the main model's server) and, with --eval, the guard's false
positives and false negatives on a labelled set, asked in the model's own
protocol (--protocol, detected from the GGUF by default). The device/CPU ratio is read with the
interpretation table (slower than CPU: not worth it; about equal: only if it
frees the CPU; 1.2-1.5x plausible; 2x+ clearly useful; 3x+ strong; unstable:
experimental), and a placement is recommended.

Speeds are reported twice, each labelled by its source. The device's own
speed is measured by llama-bench (next to llama-server, or --llama-bench)
with the servers' settings: --threads, default batch 2048/ubatch 512 and
flash attention, the same -p and -n sizes, all layers on the device, decode
from an empty context; one repetition per round, interleaved with the
server's rounds. Without llama-bench the server's timings stand in, labelled
so. The served speed is llama-server's own timings of its /completion
answers. The two differ by llama-server's work per generated token
(sampling, bookkeeping, a hand-off to its queue thread around every decode),
which llama-bench does not do; it is shown in microseconds per token. It
matters for tiny models (a 260K-parameter model at 8,000 tok/s loses a
quarter) and hardly at all for a 1-3B guard.

--auto runs only the short placement that 'aegis serve --guard-device auto'
uses, and caches it.`,
			Example: `  aegis bench sentinel --model guard.gguf --devices CPU,Vulkan0 --llama-server /usr/bin/llama-server
  aegis bench sentinel --model guard.gguf --devices CPU,Vulkan0 --url CPU=http://127.0.0.1:8080 --url Vulkan0=http://127.0.0.1:8081
  aegis bench sentinel --model guard.gguf --devices CPU,SYCL0 --report sentinel.html --json
  aegis bench sentinel --model llama-guard-3-1b.gguf --devices CPU --eval labelled.jsonl --main-url http://127.0.0.1:8080`,
			Args: noArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				if model == "" {
					return usagef("--model is required")
				}
				if _, err := llm.ParseProtocol(protocol); err != nil {
					return usagef("%v", err)
				}
				urlMap := map[string]string{}
				for _, u := range urls {
					k, v, ok := strings.Cut(u, "=")
					if !ok || k == "" || !strings.HasPrefix(v, "http") {
						return usagef("--url wants DEVICE=http://host:port, got %q", u)
					}
					if strings.EqualFold(k, "none") {
						k = "CPU"
					}
					urlMap[k] = v
				}
				for _, e := range envs {
					if !strings.Contains(e, "=") {
						return usagef("--env wants KEY=VALUE, got %q", e)
					}
				}
				if len(urlMap) < len(devs) {
					// The model is loaded here: a missing file comes first.
					if err := checkFile("--model", model); err != nil {
						return err
					}
				}
				if server == "" && len(urlMap) < len(devs) {
					// Like `aegis serve`, look on PATH before asking.
					p, err := exec.LookPath("llama-server")
					if err != nil {
						return usagef("no llama-server on PATH: pass --llama-server PATH, or a --url for every device")
					}
					server = p
				}
				if report != "" {
					switch strings.ToLower(filepath.Ext(report)) {
					case ".html", ".htm", ".svg":
					default:
						return usagef("--report must end in .html or .svg, got %q", report)
					}
				}
				mk, err := bench.ParseMainKind(mainKind)
				if err != nil {
					return usagef("--main-kind: %v", err)
				}
				ctx := c.Context()
				if len(sweep) > 0 {
					for _, t := range sweep {
						if t <= 0 {
							return usagef("--thread-sweep wants positive thread counts, got %d", t)
						}
					}
					if mainURL == "" {
						return usagef("--thread-sweep measures the guard beside a running main model: give --main-url")
					}
					s, err := bench.SweepThreads(ctx, bench.Options{Binary: server, Model: model, MainURL: mainURL, MainKind: mk,
						MainModel: mainModel, Protocol: protocol}, sweep, sweepSamples, sweepTokens)
					if err != nil {
						return err
					}
					if asJSON {
						enc := json.NewEncoder(stdio.Out)
						enc.SetIndent("", "  ")
						return enc.Encode(s)
					}
					bench.WriteThreadSweep(stdio.Out, s)
					return nil
				}
				resolved, err := bench.ResolveDevices(ctx, server, devs, envs)
				if err != nil {
					return err
				}
				if auto {
					p, err := bench.AutoPlace(ctx, bench.AutoOptions{Binary: server, Model: model, Devices: resolved, Threads: threads})
					if err != nil {
						return err
					}
					if asJSON {
						enc := json.NewEncoder(stdio.Out)
						enc.SetIndent("", "  ")
						return enc.Encode(p)
					}
					for _, cd := range p.Candidates {
						verdict := fmt.Sprintf("%7.1f ms", cd.VerdictMS)
						if cd.TimedOut {
							verdict = fmt.Sprintf(">%.0f ms", cd.VerdictMS) // a lower bound: no verdict in time
						}
						fmt.Fprintf(stdio.Out, "%-8s verdict %s  tg16 %7.0f tok/s  %.2fx  %s %s\n", cd.Device, verdict, cd.TGTokS, cd.Ratio, cd.Interpretation, cd.Error)
					}
					cached := ""
					if p.Cached {
						cached = " (cached)"
					}
					fmt.Fprintf(stdio.Out, "guard device: %s%s: %s\n", p.Device, cached, p.Reason)
					return nil
				}
				o := bench.Options{Binary: server, Model: model, Devices: resolved, URLs: urlMap, MainURL: mainURL, MainKind: mk, MainModel: mainModel,
					Threads: threads, Reps: reps, Verdicts: verdicts, Stability: stability,
					EvalFile: evalFile, Protocol: protocol, Repairs: repairs}
				if !noLlamaBench {
					o.LlamaBench = llamaBench
					if o.LlamaBench == "" {
						o.LlamaBench = bench.SiblingTool(server, "llama-bench")
					}
				}
				if quick {
					o.PP, o.TG = []int{512}, []int{16, 64}
					if reps == 0 {
						o.Reps = 2
					}
					if verdicts == 0 {
						o.Verdicts = 3
					}
					if stability == 0 {
						o.Stability = 1
					}
				}
				tty := isTTY(stdio.Err)
				if tty {
					o.Progress = progressBar(stdio.Err)
				} else {
					o.Progress = progressLines(stdio.Err, "aegis bench: ")
				}
				rep, err := bench.Run(ctx, o)
				if tty {
					fmt.Fprint(stdio.Err, "\r\033[K")
				}
				if rep == nil {
					return err
				}
				if report != "" {
					if werr := writeReport(report, rep); werr != nil {
						return werr
					}
				}
				if asJSON {
					enc := json.NewEncoder(stdio.Out)
					enc.SetIndent("", "  ")
					if jerr := enc.Encode(rep); jerr != nil {
						return jerr
					}
				} else if terr := rep.WriteTable(stdio.Out); terr != nil {
					return terr
				}
				return err
			},
		}
		f := c.Flags()
		f.StringVar(&model, "model", "", "GGUF model of the guard (the same file on every device)")
		f.StringSliceVar(&devs, "devices", []string{"CPU"}, "devices to compare: CPU and llama.cpp device names (Vulkan0, CUDA0, SYCL0, ROCm0)")
		f.StringVar(&server, "llama-server", "", "llama-server binary used to start the servers (default: llama-server on PATH)")
		f.StringVar(&llamaBench, "llama-bench", "", "llama-bench binary for the device speeds (default: next to llama-server)")
		f.BoolVar(&noLlamaBench, "no-llama-bench", false, "report the servers' timings as the device speeds instead of running llama-bench")
		f.StringArrayVar(&urls, "url", nil, "DEVICE=URL of an already running server to benchmark instead of starting one; repeatable")
		f.StringVar(&mainURL, "main-url", "", "main model server for the interference test (default: start one on the CPU)")
		f.StringVar(&mainKind, "main-kind", "auto", "API of --main-url: auto (detected), llama-server, ollama or openai (any OpenAI-compatible server)")
		f.StringVar(&mainModel, "main-model", "", "model to ask at --main-url (Ollama and OpenAI servers; default: the one they list first)")
		f.IntSliceVar(&sweep, "thread-sweep", nil, "instead of the device benchmark, start the guard on the CPU with each of these thread counts (e.g. 16,14,12,8) beside the main model at --main-url and print threads vs main model share vs time to verdict, with a recommendation")
		f.IntVar(&sweepSamples, "sweep-samples", 5, "answers and verdicts per thread count in --thread-sweep")
		f.IntVar(&sweepTokens, "sweep-tokens", 512, "tokens per main model answer in --thread-sweep")
		f.StringArrayVar(&envs, "env", nil, "KEY=VALUE for the GPU servers' environment; repeatable")
		f.BoolVar(&asJSON, "json", false, "write the results as JSON")
		f.StringVar(&report, "report", "", "write an HTML (.html) or SVG (.svg) report with charts")
		f.IntVar(&threads, "threads", 0, "threads for servers and llama-bench (-t); 0 = the physical cores less the ones left to a main server, as serve runs the guard")
		f.IntVar(&reps, "reps", 0, "repetitions per speed test (default 3)")
		f.IntVar(&verdicts, "verdicts", 0, "time-to-verdict samples per device (default 5)")
		f.IntVar(&stability, "stability", 0, "fresh-start placement runs for the stability check (default 3, -1 skips)")
		f.BoolVar(&quick, "quick", false, "a shorter run: pp512, tg16/tg64, fewer repetitions")
		f.StringVar(&evalFile, "eval", "", "labelled set (JSONL: {\"text\": ..., \"unsafe\": true|false, \"user\": optional}) for the guard's false positives/negatives")
		f.StringVar(&protocol, "protocol", "auto", "guard protocol for --eval: auto, llama-guard, qwen3guard, granite-guardian, shieldgemma, verdict-json")
		f.IntVar(&repairs, "repairs", 0, "failure-path samples (finding -> first repaired byte; default 5, -1 skips)")
		f.BoolVar(&auto, "auto", false, "run only the short cached placement (what serve --guard-device auto does)")
		return c
	})
}

func writeReport(path string, rep *bench.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if strings.EqualFold(filepath.Ext(path), ".svg") {
		err = rep.WriteSVG(f)
	} else {
		err = rep.WriteHTML(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressBar draws "[#####.....] 12/30 step" on one terminal line.
func progressBar(w io.Writer) func(done, total int, step string) {
	return func(done, total int, step string) {
		const width = 30
		n := 0
		if total > 0 {
			n = min(width, width*done/total)
		}
		fmt.Fprintf(w, "\r\033[K[%s%s] %d/%d %s", strings.Repeat("#", n), strings.Repeat(".", width-n), done, total, step)
	}
}
