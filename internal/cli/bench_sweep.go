package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/sweep"
)

// defaultSweepPrompt is the fixed prompt of the time-to-first-token run.
const defaultSweepPrompt = "Once upon a time, in a small village at the edge of a forest, there lived a girl who loved to read stories about"

func init() {
	benchSubcommands = append(benchSubcommands, func(stdio *IO) *cobra.Command {
		var (
			benchPath, serverPath, model, setsFile, chart, prompt string
			setSpecs                                              []string
			jsonOut, noBench                                      bool
			opts                                                  sweep.BenchOptions
		)
		c := &cobra.Command{
			Use:   "sweep",
			Short: "Compare llama-bench / llama-server flag sets side by side",
			Long: `sweep runs each flag set on the same model and prompts and prints prompt-processing and
generation speed (llama-bench), time to first token and memory (llama-server, when
--llama-server is given; otherwise TTFT is derived from the pp speed and memory is the
weights size llama-bench reports), each with its ratio against the first set.

A set is 'name: flags', flags passed verbatim (engine-specific ones included), optionally
preceded by environment assignments:

  aegis bench sweep --model m.gguf \
    --set 'cpu: -dev none' \
    --set 'vulkan: GGML_VK_VISIBLE_DEVICES=0 -dev Vulkan0 -ngl 99' \
    --set 'split: GGML_VK_VISIBLE_DEVICES=0 -dev Vulkan0 -ngl 2' --chart sweep.svg

--sets FILE.yaml holds a list under "sets:" with name, env, flags, bench_flags,
server_flags and skip_bench (for server-only flags such as a draft model).`,
			Args: noArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				if model == "" {
					return usagef("bench sweep needs --model FILE.gguf")
				}
				abs, err := filepath.Abs(model)
				if err != nil {
					return usageErr(err)
				}
				var sets []sweep.Set
				if setsFile != "" {
					if sets, err = sweep.LoadSets(setsFile); err != nil {
						return usageErr(err)
					}
				}
				for _, s := range setSpecs {
					set, err := sweep.ParseSet(s)
					if err != nil {
						return usageErr(err)
					}
					sets = append(sets, set)
				}
				if len(sets) == 0 {
					return usagef("bench sweep needs at least one --set or --sets FILE")
				}
				cfg := sweep.Config{Model: abs, Sets: sets, BenchOptions: opts,
					ServerOptions: sweep.ServerOptions{Prompt: prompt},
					Progress: func(set, engine string) {
						fmt.Fprintf(stdio.Err, "sweep: %s on %s\n", engine, set)
					}}
				if !noBench {
					cfg.Bench = &sweep.Engine{Path: benchPath}
				}
				if serverPath != "" {
					cfg.Server = &sweep.Engine{Path: serverPath}
				}
				if cfg.Bench == nil && cfg.Server == nil {
					return usagef("bench sweep: --no-bench needs --llama-server")
				}
				results, err := sweep.Run(c.Context(), cfg)
				if err != nil {
					return err
				}
				if chart != "" {
					f, err := os.Create(chart)
					if err != nil {
						return fmt.Errorf("bench sweep: %w", err)
					}
					werr := sweep.WriteSVG(f, "aegis bench sweep: "+filepath.Base(abs), results)
					if cerr := f.Close(); werr == nil {
						werr = cerr
					}
					if werr != nil {
						return fmt.Errorf("bench sweep: chart: %w", werr)
					}
				}
				if jsonOut {
					enc := json.NewEncoder(stdio.Out)
					enc.SetIndent("", "  ")
					if err := enc.Encode(results); err != nil {
						return err
					}
				} else if err := sweep.WriteTable(stdio.Out, results); err != nil {
					return err
				}
				for _, r := range results {
					if r.Err != "" {
						return silentExit(ExitFailure)
					}
				}
				return nil
			},
		}
		fl := c.Flags()
		fl.StringVar(&benchPath, "llama-bench", "llama-bench", "llama-bench binary")
		fl.StringVar(&serverPath, "llama-server", "", "llama-server binary; when set, each set also runs on llama-server for TTFT and memory")
		fl.BoolVar(&noBench, "no-bench", false, "skip llama-bench (server runs only)")
		fl.StringVar(&model, "model", "", "GGUF model to run every set on")
		fl.StringArrayVar(&setSpecs, "set", nil, "a flag set 'name: [ENV=V ...] flags' (repeatable)")
		fl.StringVar(&setsFile, "sets", "", "YAML file of flag sets")
		fl.BoolVar(&jsonOut, "json", false, "write the results as JSON")
		fl.StringVar(&chart, "chart", "", "write an SVG chart of the speeds to this file")
		fl.StringVar(&prompt, "prompt", defaultSweepPrompt, "fixed prompt of the llama-server time-to-first-token run")
		fl.IntVarP(&opts.Reps, "reps", "r", 3, "llama-bench repetitions (-r)")
		fl.IntVarP(&opts.Prompt, "n-prompt", "p", 512, "llama-bench prompt tokens (-p)")
		fl.IntVarP(&opts.Gen, "n-gen", "n", 128, "llama-bench generated tokens (-n)")
		return c
	})
}
