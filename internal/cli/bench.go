package cli

import (
	"github.com/spf13/cobra"
)

// benchSubcommands is filled by bench_*.go files, one per benchmark.
var benchSubcommands []command

func init() {
	register(func(stdio *IO) *cobra.Command {
		c := &cobra.Command{
			Use:   "bench",
			Short: "Measure devices and configurations on this machine",
			Long: `bench runs benchmarks on this machine's own hardware:

  aegis bench sentinel   where the guard model runs best (CPU vs. iGPU vs. second GPU)
  aegis bench sweep      side-by-side llama-server flag sets (split modes, offload, KV types)`,
			Args: noArgs,
			RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
		}
		for _, sc := range benchSubcommands {
			c.AddCommand(sc(stdio))
		}
		return c
	})
}
