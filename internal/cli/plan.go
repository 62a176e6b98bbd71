package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func init() {
	register(func(stdio *IO) *cobra.Command {
		return &cobra.Command{
			Use:   "plan",
			Short: "Advise where a GGUF model, its KV cache and a draft should live",
			RunE: func(c *cobra.Command, args []string) error {
				return errors.New("plan is not built yet (issue 7)")
			},
		}
	})
}
