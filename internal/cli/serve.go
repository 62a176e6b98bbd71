package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func init() {
	register(func(stdio *IO) *cobra.Command {
		return &cobra.Command{
			Use:   "serve",
			Short: "Run the OpenAI-compatible checking gateway in front of an upstream model server",
			RunE: func(c *cobra.Command, args []string) error {
				return errors.New("serve is not built yet (issue 4)")
			},
		}
	})
}
