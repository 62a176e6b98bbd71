package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func init() {
	register(func(stdio *IO) *cobra.Command {
		return &cobra.Command{
			Use:   "validators",
			Short: "List every check with its reasons and a policy example",
			RunE: func(c *cobra.Command, args []string) error {
				return errors.New("validators is not built yet (issue 3)")
			},
		}
	})
}
