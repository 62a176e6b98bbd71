package secretrules

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// TestEveryRuleCompilesUnderRE2 reads the embedded file again and checks
// each rule's regex against Go's RE2 syntax, and that only rules that
// judge file paths are left out of the set.
func TestEveryRuleCompilesUnderRE2(t *testing.T) {
	var cfg tomlConfig
	if err := toml.Unmarshal(gitleaksTOML, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Rules) < 200 {
		t.Fatalf("%d rules in the embedded file, want the full default set", len(cfg.Rules))
	}
	kept := Default().Rules()
	for _, r := range cfg.Rules {
		if r.Regex == "" {
			if r.Path == "" {
				t.Errorf("rule %s has neither regex nor path", r.ID)
			}
			continue
		}
		if _, err := syntax.Parse(r.Regex, syntax.Perl); err != nil {
			t.Errorf("rule %s: %v", r.ID, err)
		}
		if r.Path == "" && !r.SkipReport && !slices.Contains(kept, r.ID) {
			t.Errorf("rule %s left out of the set", r.ID)
		}
		if r.Entropy < 0 {
			t.Errorf("rule %s: negative entropy", r.ID)
		}
	}
}

// kinds are credentials each rule set must know, and look-alikes it must not flag.
var kinds = []struct {
	name, text string
	rule       string // "" = must not be found
}{
	{"stripe live", "key sk_live_51HqLyjWDarjtT1zdp7dcXz ok", "stripe-access-token"},
	{"slack bot", "xoxb-2984561237-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack-bot-token"},
	{"sendgrid", "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", "sendgrid-api-token"},
	{"anthropic", "sk-ant-api03-" + strings.Repeat("aB3_dE5-fG7h", 8)[:93] + "AA", "anthropic-api-key"},
	{"npm", "npm_4f8Kd9Lq2Xz7Vb3Nm6Pw1Rt5Yh8Jc0Ga2Se4", "npm-access-token"},
	{"aws", "AKIA2E3ZQF7B2LMC4XRW", "aws-access-token"},
	{"github", "ghp_8kZq3Lm2Nx7Vb4Qw9Er1Ty6Ui0Op5As3Df8G", "github-pat"},
	{"openai", "sk-proj-" + strings.Repeat("Xq3Lm9Vb2N", 6)[:58] + "T3BlbkFJ" + strings.Repeat("Kd4Qw8Er1T", 6)[:58], "openai-api-key"},
	{"google", "AIzaSyD4kX9pQ2mW7vR3tY8uN1bC6hJ0fL5gE2a", "gcp-api-key"},
	{"hugging face", "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", "huggingface-access-token"},
	// The header's token stands a long URL after the keyword "curl".
	{"curl bearer", `curl https://api.example.com/v1/organizations/acme/projects/web/models?limit=20 -H "Authorization: Bearer 9fKq2LmN7sVx4KpZ8wB3yCdR7s9KxQ2m"`, "curl-auth-header"},
	{"aws documented example", "AKIAIOSFODNN7EXAMPLE", ""},
	{"stripe documented test key", "sk_test_4eC39HqLyjWDarjtT1zdp7dc", ""},
	{"commit sha", "fixed in 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39", ""},
	{"uuid", "request 123e4567-e89b-12d3-a456-426614174000", ""},
	{"prose about keys", "The API key is the thing that you need, and the token expires daily.", ""},
	{"placeholder", "export OPENAI_API_KEY=<your-api-key>", ""},
}

func TestKinds(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ms := Default().Find(k.text, nil)
			if k.rule == "" {
				if len(ms) > 0 {
					t.Fatalf("found %+v", ms)
				}
				return
			}
			for _, m := range ms {
				if m.Rule == k.rule {
					return
				}
			}
			t.Fatalf("rule %s did not fire (got %+v)", k.rule, ms)
		})
	}
}

// streamAll feeds text in the given pieces and returns the matches.
func streamAll(text string, cuts []int) []Match {
	z := Default().NewStream(nil)
	var out []Match
	rep := func(m Match, _ string) { out = append(out, m) }
	prev := 0
	for _, c := range append(cuts, len(text)) {
		z.Write([]byte(text[prev:c]), rep)
		if h := z.Held(); h > c {
			panic("held past the end")
		}
		prev = c
	}
	z.Close(rep)
	sortMatches(out)
	return slices.Compact(out)
}

// sortMatches orders matches by start, then rule.
func sortMatches(ms []Match) {
	slices.SortFunc(ms, func(a, b Match) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		return strings.Compare(a.Rule, b.Rule)
	})
}

// sortedFind is Find's matches in sortMatches' order, as streamAll gives
// the stream's.
func sortedFind(text string) []Match {
	found := Default().Find(text, nil)
	sortMatches(found)
	return found
}

func splitCheck(t *testing.T, text string, r *rand.Rand) []Match {
	t.Helper()
	whole := streamAll(text, nil)
	var bytewise []int
	for i := 1; i < len(text); i++ {
		bytewise = append(bytewise, i)
	}
	var random []int
	for i := 0; i < len(text); i += 1 + r.IntN(17) {
		if i > 0 {
			random = append(random, i)
		}
	}
	for name, cuts := range map[string][]int{"bytewise": bytewise, "random": random} {
		if got := streamAll(text, cuts); !slices.Equal(got, whole) {
			t.Fatalf("%s split of %q: %+v, whole: %+v", name, text, got, whole)
		}
	}
	return whole
}

func TestStreamSplitIndependence(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 2))
	for _, k := range kinds {
		text := "Here it is: " + k.text + "\nand the rest of the answer, with api_key = \"Zq8kW2vR5xLm3N\" too."
		whole := splitCheck(t, text, r)
		if got := Default().Find(text, nil); k.rule != "" && len(got) > 0 && len(whole) == 0 {
			t.Fatalf("%s: found whole-text but not streamed", k.name)
		}
	}
}

func TestStreamAgreesWithFind(t *testing.T) {
	for _, k := range kinds {
		whole := streamAll(k.text, nil)
		found := Default().Find(k.text, nil)
		if (len(whole) > 0) != (len(found) > 0) {
			t.Errorf("%s: stream %+v, Find %+v", k.name, whole, found)
		}
	}
}

func FuzzStream(f *testing.F) {
	for _, k := range kinds {
		f.Add(k.text, uint64(1))
	}
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		if len(text) > 4096 {
			return
		}
		r := rand.New(rand.NewPCG(seed, 7))
		for _, m := range splitCheck(t, text, r) {
			if m.Start < 0 || m.End > len(text) || m.Start >= m.End {
				t.Fatalf("span %+v outside %d bytes", m, len(text))
			}
		}
	})
}

// benchText is a KiB of ordinary answer text with the words that wake the
// keyword filter ("key", "token", "api", "they").
var benchText = strings.Repeat("They asked how the API key and the access token are rotated; the answer: "+
	"run the job nightly, check the logs, and keep the config in version control. ", 8)[:1024]

func BenchmarkStreamKiB(b *testing.B) {
	s := Default()
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(benchText)))
	b.ReportAllocs()
	for b.Loop() {
		z := s.NewStream(buf)
		for i := 0; i < len(benchText); i += 64 {
			z.Write([]byte(benchText[i:min(i+64, len(benchText))]), func(Match, string) {})
		}
		z.Close(func(Match, string) {})
		buf = z.Buffer()
	}
}

// BenchmarkStreamTypical reads the repetition check's benign corpus
// (prose, a list, Go code, a poem, a table) in 16-byte chunks, as the
// gateway feeds streamed text; ns/op is per pass over the whole text.
func BenchmarkStreamTypical(b *testing.B) {
	var text []byte
	for _, f := range []string{"pass_prose_essay.txt", "pass_numbered_list.txt", "pass_go_code.go.txt", "pass_poem_refrain.txt", "pass_markdown_table.txt"} {
		d, err := os.ReadFile("../validator/repetition/testdata/corpus/" + f)
		if err != nil {
			b.Fatal(err)
		}
		text = append(text, d...)
	}
	s := Default()
	buf := make([]byte, 0, 8192)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		z := s.NewStream(buf)
		for i := 0; i < len(text); i += 16 {
			z.Write(text[i:min(i+16, len(text))], func(Match, string) {})
		}
		z.Close(func(Match, string) {})
		buf = z.Buffer()
	}
}

// denseText is an environment file of about n bytes: credentials of the
// kinds the rules know, one assignment a line, as a deployment's secrets
// file or a careless tool result holds them.
func denseText(n int) string {
	r := rand.New(rand.NewPCG(35, 3))
	key := func(alphabet string, k int) string {
		b := make([]byte, k)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString("AWS_ACCESS_KEY_ID=AKIA" + key("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16) + "\n")
		sb.WriteString("AWS_SECRET_ACCESS_KEY=" + key(alnum+"/+", 40) + "\n")
		sb.WriteString("GITHUB_TOKEN=ghp_" + key(alnum, 36) + "\n")
		sb.WriteString("STRIPE_SECRET_KEY=sk_live_" + key(alnum, 24) + "\n")
		sb.WriteString(`export DATADOG_API_KEY="` + key(alnum, 32) + "\"\n")
		sb.WriteString("DB_PASSWORD='" + key(alnum+"!#%", 18) + "'  # staging only\n")
		sb.WriteString("REPORT_BUCKET=s3://halcyon-reports-eu/nightly\n")
	}
	return sb.String()[:n]
}

// BenchmarkStreamDense is the worst case the rules meet: text where
// nearly every line holds a credential, in 64-byte pieces.
func BenchmarkStreamDense(b *testing.B) {
	text := []byte(denseText(4096))
	s := Default()
	buf := make([]byte, 0, 8192)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	found := 0
	for b.Loop() {
		z := s.NewStream(buf)
		for i := 0; i < len(text); i += 64 {
			z.Write(text[i:min(i+64, len(text))], func(Match, string) { found++ })
		}
		z.Close(func(Match, string) { found++ })
		buf = z.Buffer()
	}
	if found == 0 {
		b.Fatal("no credential found in the dense text")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000/(float64(len(text))/1024), "us/KiB")
}

// TestStreamEqualsFind checks the stream's shortcuts (a rule's regex
// anchored at its keywords, the allow-lists' filter) against Find, which
// runs every woken rule's whole regex over the whole text: on text full of
// credentials and on the kinds, whole and split, they find the same.
func TestStreamEqualsFind(t *testing.T) {
	var sb strings.Builder
	for _, k := range kinds {
		sb.WriteString("note: " + k.text + "\nconfig key = " + k.text + "\n")
	}
	r := rand.New(rand.NewPCG(35, 5))
	for name, text := range map[string]string{"dense": denseText(4096), "kinds": sb.String()} {
		found := sortedFind(text)
		if got := splitCheck(t, text, r); !slices.Equal(got, found) {
			t.Errorf("%s: stream %d matches, Find %d\nstream %+v\nFind   %+v", name, len(got), len(found), got, found)
		}
		if len(found) < 20 {
			t.Errorf("%s: %d matches, the text is meant to be full of them", name, len(found))
		}
	}
}

// TestGenericGivesWay checks that a generic rule's finding gives way to a
// specific rule's that holds the same secret, as gitleaks reports them,
// and stands where no specific rule knows the key.
func TestGenericGivesWay(t *testing.T) {
	cases := []struct {
		name, text, rule string
	}{
		{"github token in an assignment", "GITHUB_TOKEN=ghp_8kZq3Lm2Nx7Vb4Qw9Er1Ty6Ui0Op5As3Df8G\n", "github-pat"},
		{"stripe key in an assignment", "STRIPE_SECRET_KEY=sk_live_51HqLyjWDarjtT1zdp7dcXz\n", "stripe-access-token"},
		{"unknown vendor's key", `export DATADOG_API_KEY="Zq8kW2vR5xLm3NpT7bY4cH9dJ6fG1sAe"` + "\n", "generic-api-key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for name, got := range map[string][]Match{"Find": Default().Find(c.text, nil), "stream": streamAll(c.text, nil)} {
				if len(got) != 1 || got[0].Rule != c.rule {
					t.Errorf("%s: %+v, want one finding of %s", name, got, c.rule)
				}
			}
		})
	}
}

// TestLiteralFacts checks what the stream's shortcuts read from a rule's
// regex: whether its secret always holds a keyword, the strings a window
// must hold before the rule runs, and whether its matches begin at a
// keyword.
func TestLiteralFacts(t *testing.T) {
	cases := []struct {
		rule      string
		inSecret  bool
		need      []string
		atKeyword bool
	}{
		{"aws-access-token", true, nil, true},                         // \b(A(?:KIA|SIA|3T...)...) once the parser factors it
		{"github-pat", true, nil, true},                               // ghp_..., no group: the secret is the match
		{"jwt", true, []string{".ey"}, true},                          // wakes on "ey" in every "key"
		{"generic-api-key", false, nil, false},                        // the keyword stands before the secret
		{"gocardless-api-token", true, []string{"gocardless"}, false}, // woken by live_ alone
		{"openai-api-key", true, nil, false},                          // its keyword stands inside the key, not at its start
	}
	rules := map[string]*Rule{}
	for i := range Default().rules {
		rules[Default().rules[i].ID] = &Default().rules[i]
	}
	for _, c := range cases {
		r := rules[c.rule]
		if r == nil {
			t.Fatalf("no rule %s", c.rule)
		}
		if r.inSecret != c.inSecret || !slices.Equal(r.need, c.need) || (r.atKeyword != nil) != c.atKeyword {
			t.Errorf("%s: inSecret %v need %q atKeyword %v, want %v %q %v", c.rule, r.inSecret, r.need, r.atKeyword != nil, c.inSecret, c.need, c.atKeyword)
		}
	}
}

// mixedText is lines of the kinds' keys in the forms configuration files
// and answers hold them: assignments with several keywords, a value on
// the line after its key, quoted and bare, and prose between.
func mixedText(r *rand.Rand, lines int) string {
	forms := []string{
		"%s\n", "AWS_SECRET_ACCESS_KEY=%s\n", "api_key: \"%s\"\n", "token:\n  %s\n", "password = '%s' # staging\n",
		"the key is %s, rotate it\n", "Authorization: Bearer %s\n", "KEY_ID=%s SECRET_KEY=%s\n",
	}
	var keys []string
	for _, k := range kinds {
		if k.rule != "" {
			keys = append(keys, k.text)
		}
	}
	keys = append(keys, "Zq8kW2vR5xLm3NpT7bY4cH9dJ6fG1sAe", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8kW2vR5x")
	var sb strings.Builder
	for range lines {
		f := forms[r.IntN(len(forms))]
		args := []any{keys[r.IntN(len(keys))], keys[r.IntN(len(keys))]}
		sb.WriteString(fmt.Sprintf(f, args[:strings.Count(f, "%s")]...))
		if r.IntN(3) == 0 {
			sb.WriteString("Nothing else changed in the access layer.\n")
		}
	}
	return sb.String()
}

// TestStreamEqualsFindMixed runs the stream and Find over many mixed
// texts, split at random.
func TestStreamEqualsFindMixed(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 9))
	for i := range 40 {
		text := mixedText(r, 12)
		found := sortedFind(text)
		if got := splitCheck(t, text, r); !slices.Equal(got, found) {
			t.Fatalf("text %d: stream %d matches, Find %d\n%s\nstream %+v\nFind   %+v", i, len(got), len(found), text, got, found)
		}
	}
}

// FuzzStreamFindsWhatFindFinds checks the stream's shortcuts against
// Find on texts the fuzzer derives from mixed configuration text: every
// credential Find reports, the stream reports. (The stream may report
// more: it judges a word when the word ends, where Find reads the whole
// text, and a curl command's header it judged is not taken back.)
func FuzzStreamFindsWhatFindFinds(f *testing.F) {
	r := rand.New(rand.NewPCG(35, 10))
	for range 8 {
		f.Add(mixedText(r, 3))
	}
	f.Add("curl -H \"AuthoriZAtion:01789A2B\"00")
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 2048 {
			return
		}
		got := streamAll(text, nil)
		for _, m := range Default().Find(text, nil) {
			if !slices.Contains(got, m) {
				t.Fatalf("Find's %+v missed by the stream, which found %+v", m, got)
			}
		}
	})
}
