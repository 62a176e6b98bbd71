package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Work is what an upstream says about the prompts it is processing, asked
// while a request waits for its first event (Upstream.Work).
type Work struct {
	// Working: the upstream reports work that may be the request's own
	// (llama-server: a slot is processing a task; Ollama: the request's
	// model is loaded).
	Working bool
	// Detail says what the answer was, for a stall's message; it holds
	// no prompt or output.
	Detail string
}

// ErrNoWorkReport is returned by Work for an upstream that cannot say
// whether it is working (an OpenAI-compatible server, or a llama-server
// started with --no-slots).
var ErrNoWorkReport = errors.New("the upstream does not report its work")

// Slot is one llama-server slot as GET /slots reports it (build 11669
// serves it by default; --no-slots turns it off).
type Slot struct {
	ID         int   `json:"id"`
	Processing bool  `json:"is_processing"`
	Task       int64 `json:"id_task"`
	// PromptTokens is the prompt's length, PromptDone how much of it the
	// slot has processed so far.
	PromptTokens int `json:"n_prompt_tokens"`
	PromptDone   int `json:"n_prompt_tokens_processed"`
}

// ParseSlots reads llama-server's GET /slots answer: a JSON array of
// slots, each with at least "id" and "is_processing".
func ParseSlots(b []byte) ([]Slot, error) {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("/slots: want a JSON array of slots: %w", err)
	}
	slots := make([]Slot, len(raw))
	for i, m := range raw {
		for _, k := range []string{"id", "is_processing"} {
			if _, ok := m[k]; !ok {
				return nil, fmt.Errorf("/slots: slot %d has no %q", i, k)
			}
		}
		one, _ := json.Marshal(m)
		if err := json.Unmarshal(one, &slots[i]); err != nil {
			return nil, fmt.Errorf("/slots: slot %d: %w", i, err)
		}
	}
	return slots, nil
}

// ParseLoaded reads Ollama's GET /api/ps answer: the names of the models
// loaded.
func ParseLoaded(b []byte) ([]string, error) {
	var ps struct {
		Models *[]struct {
			Name  string `json:"name"`
			Model string `json:"model"`
		} `json:"models"`
	}
	if err := json.Unmarshal(b, &ps); err != nil {
		return nil, fmt.Errorf("/api/ps: %w", err)
	}
	if ps.Models == nil {
		return nil, errors.New(`/api/ps: no "models" list`)
	}
	var names []string
	for _, m := range *ps.Models {
		names = append(names, m.Name, m.Model)
	}
	return names, nil
}

// Work asks the upstream whether it is working on a prompt for model:
// llama-server through GET /slots (any slot processing a task: the
// server does not say which client's request a slot serves), Ollama
// through GET /api/ps (the model is loaded: Ollama reports nothing about
// a prompt in progress). Other kinds answer ErrNoWorkReport.
func (u *Upstream) Work(ctx context.Context, model string) (Work, error) {
	switch u.Kind {
	case KindLlamaServer:
		code, b, err := u.Get(ctx, "/slots")
		if err != nil {
			return Work{}, err
		}
		if code == http.StatusNotFound || code == http.StatusNotImplemented {
			return Work{}, fmt.Errorf("GET /slots answered %d (started with --no-slots?): %w", code, ErrNoWorkReport)
		}
		if code != http.StatusOK {
			return Work{}, fmt.Errorf("GET /slots answered %d", code)
		}
		slots, err := ParseSlots(b)
		if err != nil {
			return Work{}, err
		}
		busy := 0
		var detail []string
		for _, s := range slots {
			if s.Processing {
				busy++
				detail = append(detail, fmt.Sprintf("slot %d: task %d, %d of %d prompt tokens", s.ID, s.Task, s.PromptDone, s.PromptTokens))
			}
		}
		if busy == 0 {
			return Work{Detail: fmt.Sprintf("llama-server reports none of its %d slots processing", len(slots))}, nil
		}
		return Work{Working: true, Detail: strings.Join(detail, "; ")}, nil
	case KindOllama:
		code, b, err := u.Get(ctx, "/api/ps")
		if err != nil {
			return Work{}, err
		}
		if code != http.StatusOK {
			return Work{}, fmt.Errorf("GET /api/ps answered %d", code)
		}
		names, err := ParseLoaded(b)
		if err != nil {
			return Work{}, err
		}
		for _, n := range names {
			if n == model || n == model+":latest" {
				return Work{Working: true, Detail: fmt.Sprintf("Ollama has model %q loaded", model)}, nil
			}
		}
		return Work{Detail: fmt.Sprintf("Ollama has no model %q loaded", model)}, nil
	}
	return Work{}, ErrNoWorkReport
}
