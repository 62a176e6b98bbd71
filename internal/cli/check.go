package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func init() {
	register(func(stdio *IO) *cobra.Command {
		return &cobra.Command{
			Use:   "check",
			Short: "Check recorded cases (JSONL) offline and print one verdict per case",
			RunE: func(c *cobra.Command, args []string) error {
				return errors.New("check is not built yet (issue 3)")
			},
		}
	})
}
