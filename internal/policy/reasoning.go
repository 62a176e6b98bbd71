package policy

import (
	"fmt"
	"strings"
)

// Reasoning is what Aegis does with a model's reasoning (llama-server's
// reasoning_content, Ollama's thinking, a <think> section of the text).
type Reasoning int

// The reasoning modes. Check (the default) holds reasoning behind the
// release point and feeds it to every text check, like the answer; hide
// checks it the same way and removes it from what the client gets; pass
// sends it as it comes, unchecked.
const (
	ReasoningCheck Reasoning = iota
	ReasoningHide
	ReasoningPass
)

var reasoningNames = [...]string{"check", "hide", "pass"}

func (r Reasoning) String() string {
	if r >= 0 && int(r) < len(reasoningNames) {
		return reasoningNames[r]
	}
	return fmt.Sprintf("Reasoning(%d)", int(r))
}

// Checked reports whether reasoning is fed to the checks.
func (r Reasoning) Checked() bool { return r != ReasoningPass }

// ParseReasoning reads a reasoning mode by name.
func ParseReasoning(s string) (Reasoning, error) {
	for i, n := range reasoningNames {
		if s == n {
			return Reasoning(i), nil
		}
	}
	return 0, fmt.Errorf("unknown reasoning mode %q (want %s)", s, strings.Join(reasoningNames[:], ", "))
}
