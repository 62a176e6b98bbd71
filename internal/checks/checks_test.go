package checks

import (
	"testing"

	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestRegisterAll: every built-in check is registered by name, the
// default policy finds all of its checks, and registering the default
// twice is harmless.
func TestRegisterAll(t *testing.T) {
	r := Registry()
	for _, name := range []string{"guard", "guard_llm", "banned", "json_schema", "json_syntax", "leak", "length", "regex", "repetition", "stall", "tool_call", "no_commas"} {
		if _, ok := r.Lookup(name); !ok {
			t.Errorf("%s is not registered", name)
		}
	}
	if n := len(policy.DefaultFor(r).Checks); n != len(policy.DefaultChecks) {
		t.Errorf("the default policy enables %d checks, want %d", n, len(policy.DefaultChecks))
	}
	RegisterDefault()
	RegisterDefault()
	if len(validator.Default.All()) != len(r.All()) {
		t.Errorf("validator.Default has %d checks, want %d", len(validator.Default.All()), len(r.All()))
	}
}
