package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func init() {
	register(func(stdio *IO) *cobra.Command {
		return &cobra.Command{
			Use:   "devices",
			Short: "List compute devices and how suitable each is for a guard model",
			RunE: func(c *cobra.Command, args []string) error {
				return errors.New("devices is not built yet (issue 6)")
			},
		}
	})
}
