package llm

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/gguf"
)

// ModelInfo is what protocol detection reads about a guard model: the GGUF
// metadata (general.name, general.basename, tokenizer.chat_template) or
// what a server reports of it (its path or name, its chat template).
type ModelInfo struct {
	Name, Basename, Path, ChatTemplate string
}

// Detect picks the protocol a model was trained on: first from its names,
// then from marks only that family's chat template carries. A model that
// matches none is a general instruct model: verdict-json.
func Detect(m ModelInfo) Protocol {
	for _, s := range []string{m.Basename, m.Name, filepath.Base(m.Path)} {
		if p := fromName(s); p != ProtocolAuto {
			return p
		}
	}
	t := m.ChatTemplate
	switch {
	case strings.Contains(t, "Safety: Safe") && strings.Contains(t, "Categories:"):
		return ProtocolQwen3Guard
	case strings.Contains(t, "<BEGIN UNSAFE CONTENT CATEGORIES>") && strings.Contains(t, "'safe' or 'unsafe'"):
		return ProtocolLlamaGuard
	case strings.Contains(t, "<start_of_risk_definition>"):
		return ProtocolGraniteGuardian
	case strings.Contains(t, "policy expert") && strings.Contains(t, "Human Question:"):
		return ProtocolShieldGemma
	}
	return ProtocolVerdictJSON
}

// fromName recognises a guard family in a model name, ignoring case,
// spaces, dashes, dots and underscores.
func fromName(s string) Protocol {
	k := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '_', '.':
			return -1
		}
		return r
	}, strings.ToLower(s))
	switch {
	case strings.Contains(k, "llamaguard"):
		return ProtocolLlamaGuard
	case strings.Contains(k, "qwen3guard"):
		return ProtocolQwen3Guard
	case strings.Contains(k, "graniteguardian"):
		return ProtocolGraniteGuardian
	case strings.Contains(k, "shieldgemma"):
		return ProtocolShieldGemma
	}
	return ProtocolAuto
}

// DetectFile reads a GGUF file's metadata and detects its protocol.
func DetectFile(path string) (Protocol, error) {
	m, err := gguf.Open(path, gguf.Limits{})
	if err != nil {
		return 0, fmt.Errorf("guard llm: detect protocol: %w", err)
	}
	return Detect(ModelInfo{Name: m.Name, Basename: m.Basename, Path: path, ChatTemplate: m.ChatTemplate}), nil
}

// Info asks the guard server about its model: llama-server's /props
// (model path and chat template) or Ollama's /api/show (template and
// general.* metadata).
func (c *Client) Info(ctx context.Context) (ModelInfo, error) {
	if c.Kind == KindOllama {
		var out struct {
			Template  string         `json:"template"`
			ModelInfo map[string]any `json:"model_info"`
		}
		if err := c.post(ctx, "/api/show", map[string]any{"model": c.Model}, &out); err != nil {
			return ModelInfo{}, err
		}
		str := func(k string) string { s, _ := out.ModelInfo[k].(string); return s }
		return ModelInfo{Name: c.Model, Basename: str("general.basename"), Path: str("general.name"), ChatTemplate: out.Template}, nil
	}
	var out struct {
		ModelPath    string `json:"model_path"`
		ModelAlias   string `json:"model_alias"`
		ChatTemplate string `json:"chat_template"`
	}
	if err := c.get(ctx, "/props", &out); err != nil {
		return ModelInfo{}, err
	}
	return ModelInfo{Name: out.ModelAlias, Path: out.ModelPath, ChatTemplate: out.ChatTemplate}, nil
}

// Resolve returns p unless it is auto, in which case it asks the server
// what model it runs and detects the protocol from that.
func (c *Client) Resolve(ctx context.Context, p Protocol) (Protocol, error) {
	if p != ProtocolAuto {
		return p, nil
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("guard llm: detect protocol: %w", err)
	}
	return Detect(info), nil
}

func (c *Client) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("guard llm: %w", err)
	}
	return c.do(req, path, out)
}
