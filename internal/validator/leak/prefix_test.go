package leak

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

// wordRulesOnly is the default configuration without gitleaks' rules,
// which hold the whole word in progress (TestRulesHoldOneWord): only the
// context rules gitleaks lacks (creds.go) hold.
func wordRulesOnly() *Config {
	c := DefaultConfig()
	c.Rules = false
	return c
}

// TestRulesHoldOneWord: with gitleaks' rules on, the word in progress is
// held until it ends, and nothing before it.
func TestRulesHoldOneWord(t *testing.T) {
	d, err := New(*DefaultConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, step := range []struct{ feed, held string }{
		{"The ", ""}, {"dog", "dog"}, {" ran", "ran"}, {" home. ", ""}, {"Here", "Here"}, {", said", "said"}, {" he\n", ""},
	} {
		d.Write([]byte(step.feed))
		text += step.feed
		if got := text[d.Settled():]; got != step.held {
			t.Fatalf("after %q: held %q, want %q", text, got, step.held)
		}
	}
}

// TestWordHold feeds texts byte by byte and checks, after each step, which
// tail of the output the check still holds: ordinary words flow letter by
// letter; a word is held from the first byte where a credential could still
// begin, and no byte of a credential is ever released.
func TestWordHold(t *testing.T) {
	cases := []struct {
		name  string
		steps []string // feed, then the held tail after it, in pairs
	}{
		{"ordinary words flow", []string{"\"", "", "H", "", "e", "", "re", "", ", said", "", " the", "", " dog.", ""}},
		{"url password from the colon after the user", []string{"https://bob:", "", "s3cr", "s3cr", "et!x", "s3cret!x", "@db", "s3cret!x@db"}},
		{"url without a password", []string{"https://example.org/a", ""}},
		{"url with a short password is not a credential", []string{"http://u:ab@", "", "d", ""}},
		{"dashes may begin a private key header", []string{"---", "---", "--", "-----", "B", "-----B", "EGIN", "-----BEGIN"}},
		{"a markdown rule is not a header", []string{"------", "-----", "\n", ""}},
		{"aws letters flow, a run that may be the key waits", []string{"aw", "", "s", "", "_secret", "secret", " = ", ""}},
		{"token shapes are gitleaks' to hold", []string{"key AKIA", "", " sk-a", "", " eyJ", "", " ghp_", "", " hf_", ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := New(*wordRulesOnly(), "")
			if err != nil {
				t.Fatal(err)
			}
			var text string
			for i := 0; i < len(c.steps); i += 2 {
				for _, b := range []byte(c.steps[i]) {
					d.Write([]byte{b})
				}
				text += c.steps[i]
				if got := text[d.Settled():]; got != c.steps[i+1] {
					t.Fatalf("after %q: held %q, want %q", text, got, c.steps[i+1])
				}
			}
		})
	}
}

// credFragments build adversarial streams: credential shapes cut into
// pieces, ordinary words that begin like them, and the separators that end
// words and lines.
var credFragments = []string{
	"A", "AKIA", "ASIA", "2E3ZQF7B2LMC4XRW", "AIza", "SyD4kX9pQ2mW7vR3tY8uN1bC6hJ0fL5gE2a",
	"sk-", "sk_live_", "rk_", "ant-", "proj-", "aB3dE5fG7hJ9kL1mN3pQ5rS7tV9wX1yZ3", "x9K2m",
	"ghp_", "gh", "github_pat_", "xox", "b-", "eyJ", "hbGciOiJIUzI1NiJ9", ".", "hf_", "s",
	"://", "https", "user", ":", "@", "/", "-", "-----", "BEGIN", " RSA PRIVATE KEY", "aws", "secret",
	"password = \"", "\"", "=", " ", " ", "\n", "sky", "eye", "ghost", "Here", "the", "é",
}

// TestAdversarialSplits streams random mixes of credential pieces and
// words byte by byte and in random pieces. validatortest.Run fails if a
// finding ever starts before a point already released, or if the findings
// depend on the split.
func TestAdversarialSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 17))
	found := 0
	for k := 0; k < 3000; k++ {
		var b strings.Builder
		for n := 4 + r.IntN(20); n > 0; n-- {
			b.WriteString(credFragments[r.IntN(len(credFragments))])
		}
		text := b.String()
		fs := validatortest.SplitIndependent(t, func() validator.Validator {
			d, _ := New(*DefaultConfig(), "")
			return d
		}, text)
		if len(fs) > 0 {
			found++
		}
	}
	if found < 100 {
		t.Fatalf("only %d of 3000 adversarial streams held a credential: the test does not exercise the holds", found)
	}
	t.Logf("%d of 3000 adversarial streams held a credential", found)

	// Copies of a system prompt: its words in order with gaps, edits and
	// words that begin like its own.
	sys := "You are SupportBot for Acme Cloud. Only answer questions about Acme Cloud billing, invoices and plan upgrades. Never discuss competitors."
	words := strings.Fields(sys)
	others := []string{"Sure,", "bill", "invoice", "Acme", "Clouds", "only", "support", "you", "and", "the", "\n", "-", "questions?"}
	copies := 0
	for k := 0; k < 1500; k++ {
		var b strings.Builder
		for i := r.IntN(len(words)); i < len(words) && b.Len() < 400; i++ {
			switch r.IntN(8) {
			case 0:
				b.WriteString(others[r.IntN(len(others))] + " ")
			case 1:
				i += r.IntN(3) // skip a few words
			}
			b.WriteString(words[i%len(words)] + " ")
		}
		fs := validatortest.SplitIndependent(t, func() validator.Validator {
			d, _ := New(*DefaultConfig(), sys)
			return d
		}, b.String())
		if len(fs) > 0 {
			copies++
		}
	}
	if copies < 50 {
		t.Fatalf("only %d of 1500 streams copied the system prompt: the test does not exercise the holds", copies)
	}
	t.Logf("%d of 1500 streams copied the system prompt", copies)
}

func FuzzMayBeginCred(f *testing.F) {
	for _, s := range credFragments {
		f.Add(s)
	}
	f.Add("xsk-ant-aB3dE5fG7hJ9kL1mN3pQ5rS7tV9wX1yZ3aB3dE5fG7")
	f.Add("https://bob:s3cret!x@db")
	f.Fuzz(func(t *testing.T, w string) {
		if len(w) > 160 || strings.ContainsAny(w, " \n\t\"'") {
			return
		}
		// Prefix-closed: a position cleared for a word is cleared for
		// every longer word.
		word := []byte(w)
		for i := range word {
			for n := i + 1; n < len(word); n++ {
				if !mayBeginCred(word[:n], i) && mayBeginCred(word[:n+1], i) {
					t.Fatalf("position %d of %q cleared at %d bytes, may begin a credential at %d", i, w, n, n+1)
				}
			}
		}
	})
}

// TestOverlapHold: with a system prompt, the copy check holds only text
// that may begin a copy of it: a recent run of words that opens one of its
// shingles, or a word being read whose letters begin such a word. Other
// text flows word by word and letter by letter.
func TestOverlapHold(t *testing.T) {
	sys := "You are SupportBot for Acme Cloud. Only answer questions about Acme Cloud billing, invoices and plan upgrades. Never discuss competitors."
	steps := []string{ // feed, then the held tail after it, in pairs
		"S", "S", // SupportBot begins a shingle
		"ur", "",
		"e, I can help with ", "",
		"bill", "bill",
		"ing", "billing",
		" q", "billing q", // "billing invoices ..." is still possible while the next word is read
		"uestions", "billing questions",
		".", "questions.", // "billing questions" opens no shingle; "questions about Acme ..." may follow
		" Th", "questions. Th",
		"anks!", "",
		" Only answer questions about Acme", "Only answer questions about Acme",
		" Cloud", "Only answer questions about Acme Cloud", // a copy under way
	}
	d, err := New(*wordRulesOnly(), sys)
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for i := 0; i < len(steps); i += 2 {
		for _, b := range []byte(steps[i]) {
			d.Write([]byte{b})
		}
		text += steps[i]
		if got := text[d.Settled():]; got != steps[i+1] {
			t.Fatalf("after %q: held %q, want %q", text, got, steps[i+1])
		}
	}
	// The copy is still found, from where it began.
	text2 := text + " billing, invoices and plan upgrades. Never discuss competitors. Bye"
	fs := validatortest.SplitIndependent(t, func() validator.Validator {
		d, _ := New(*DefaultConfig(), sys)
		return d
	}, text2)
	if len(fs) != 1 || fs[0].Reason != validator.ReasonSystemPromptLeak || !strings.HasPrefix(text2[fs[0].Start:], "Only answer") {
		t.Fatalf("findings %+v", fs)
	}
}
