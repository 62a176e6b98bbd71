package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/guardlab/eval"
)

// llmFlags are the eval flags that configure a guard LLM.
type llmFlags struct {
	url, kind, model string
	protocol         string
	slot             int
	timeout          time.Duration
}

func (l *llmFlags) register(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&l.url, "url", "", "guard server base URL (with --guard llm)")
	f.StringVar(&l.kind, "kind", "llama-server", "guard server kind: llama-server (or llama) or ollama")
	f.StringVar(&l.model, "model", "", "model name (Ollama)")
	f.StringVar(&l.protocol, "protocol", "auto", "guard protocol: auto (from the server's model), llama-guard, qwen3guard, granite-guardian, shieldgemma, verdict-json")
	f.IntVar(&l.slot, "id-slot", 0, "llama-server slot to pin (-1: any)")
	f.DurationVar(&l.timeout, "timeout", 60*time.Second, "per-text time limit for the guard LLM")
}

func (l *llmFlags) scorer() (eval.Scorer, error) {
	if l.url == "" {
		return nil, usagef("eval: --guard llm needs --url")
	}
	k, err := llm.ParseKind(l.kind)
	if err != nil {
		return nil, usagef("eval: %v", err)
	}
	if k == llm.KindOllama && l.model == "" {
		return nil, usagef("eval: --kind ollama needs --model")
	}
	p, err := llm.ParseProtocol(l.protocol)
	if err != nil {
		return nil, usagef("eval: %v", err)
	}
	return &llm.Scorer{Client: &llm.Client{BaseURL: l.url, Kind: k, Model: l.model, Slot: l.slot}, Timeout: l.timeout, Protocol: p}, nil
}
