package catalog

import (
	"testing"

	"github.com/aegis-sentinel/aegis/internal/guard/llm"
)

// TestCatalogListsNativeGuards: every guard model family whose own
// protocol Aegis speaks (guard_llm's protocol setting) has a small GGUF
// build in the catalogue that aegis plan --guard-budget can place, with
// the public source of its numbers and a protocol that parses.
func TestCatalogListsNativeGuards(t *testing.T) {
	for _, p := range []llm.Protocol{llm.ProtocolLlamaGuard, llm.ProtocolQwen3Guard, llm.ProtocolGraniteGuardian, llm.ProtocolShieldGemma} {
		found := false
		for _, e := range Entries {
			if e.Protocol != p.String() {
				continue
			}
			found = true
			if e.Runtime != LlamaServer || e.FileBytes == 0 || e.Source == "" || e.Layers == 0 || e.HeadsKV == 0 || e.HeadDim == 0 {
				t.Errorf("%s: incomplete entry %+v", e.ID, e)
			}
			if e.FileBytes > 3*gb {
				t.Errorf("%s: %d bytes is not a small build", e.ID, e.FileBytes)
			}
		}
		if !found {
			t.Errorf("no catalogued GGUF guard speaks protocol %s", p)
		}
	}
	for _, e := range Entries {
		if e.Protocol == "" {
			continue
		}
		if _, err := llm.ParseProtocol(e.Protocol); err != nil {
			t.Errorf("%s: %v", e.ID, err)
		}
	}
}
