package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/guard/eval"
)

// llmFlags are the eval flags that configure a guard LLM.
type llmFlags struct {
	url, kind, model string
}

func (l *llmFlags) register(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&l.url, "url", "", "guard server base URL (with --guard llm)")
	f.StringVar(&l.kind, "kind", "llama", "guard server kind: llama (llama-server) or ollama")
	f.StringVar(&l.model, "model", "", "model name (Ollama)")
}

func (l *llmFlags) scorer() (eval.Scorer, error) {
	return nil, errors.New("eval: --guard llm is not wired yet")
}
