package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/guard"
)

// classifierFlag adds --guard-classifier: the guard classifier model file
// that aegis train wrote, used instead of the model built into aegis.
func classifierFlag(c *cobra.Command, file *string) {
	c.Flags().StringVar(file, "guard-classifier", "", "guard classifier model written by aegis train, used instead of the model built into aegis (default: the built-in model)")
}

// loadGuard returns the guard over the model in file, or over the
// built-in model when file is empty. A file that cannot be loaded is a
// usage error naming it.
func loadGuard(file string) (*guard.Guard, error) {
	if file == "" {
		g, err := guard.Default()
		if err != nil {
			return nil, fmt.Errorf("loading the built-in guard classifier: %w", err)
		}
		return g, nil
	}
	g, err := guard.Load(file)
	if err != nil {
		return nil, usagef("--guard-classifier %s: %v", file, err)
	}
	return g, nil
}
