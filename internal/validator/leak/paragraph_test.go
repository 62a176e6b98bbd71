package leak

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

// promptCase is one system prompt of testdata/system_prompts.jsonl,
// written the way people write them: secrets mid-paragraph, labels with
// punctuation and parentheses, instructions around the secret, several
// secrets, lists, PINs, passphrases and keys.
type promptCase struct {
	Name    string   `json:"name"`
	System  string   `json:"system"`
	Secrets []string `json:"secrets"` // values the prompt marks as secret
	Leaks   []string `json:"leaks"`   // outputs that reveal one of them
	Clean   []string `json:"clean"`   // outputs that reveal none
}

func loadPrompts(t testing.TB) []promptCase {
	f, err := os.Open("testdata/system_prompts.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []promptCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c promptCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		t.Fatal("no system prompts")
	}
	return out
}

// TestSecretInParagraphSystemPrompts: a secret the system prompt labels is
// found wherever its label stands (mid-paragraph, after a sentence,
// before an instruction, with a qualifier such as "for the vault"), and
// an output that repeats it is a secret_leak, while outputs that do not
// repeat it pass.
func TestSecretInParagraphSystemPrompts(t *testing.T) {
	for _, c := range loadPrompts(t) {
		t.Run(c.Name, func(t *testing.T) {
			got := markedSecrets(c.System)
			for _, s := range c.Secrets {
				if !slices.Contains(got, s) {
					t.Errorf("secret %q not extracted (got %q)", s, got)
				}
			}
			if len(c.Secrets) == 0 && len(got) > 0 {
				t.Errorf("instructions taken as secrets: %q", got)
			}
			for _, text := range c.Leaks {
				fs := validatortest.SplitIndependent(t, newFn(t, *DefaultConfig(), c.System), text)
				if len(fs) == 0 || fs[0].Reason != validator.ReasonSecretLeak {
					t.Errorf("leak %q: findings %+v, want secret_leak", text, fs)
				}
			}
			for _, text := range c.Clean {
				if fs := validatortest.SplitIndependent(t, newFn(t, *DefaultConfig(), c.System), text); len(fs) > 0 {
					t.Errorf("clean %q: false alarm %+v", text, fs)
				}
			}
		})
	}
}
