package leak

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
	"go.yaml.in/yaml/v3"
)

type corpusCase struct {
	Name   string `json:"name"`
	System string `json:"system"`
	Text   string `json:"text"`
	Bad    bool   `json:"bad"`
}

func loadCorpus(t testing.TB) []corpusCase {
	f, err := os.Open("testdata/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		var c corpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func newFn(t testing.TB, cfg Config, system string) func() validator.Validator {
	return func() validator.Validator {
		d, err := New(cfg, system)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

func TestCorpusPrecisionRecall(t *testing.T) {
	var tp, fp, fn, tn int
	golden := map[string][]validator.Finding{}
	for _, c := range loadCorpus(t) {
		fs := validatortest.SplitIndependent(t, newFn(t, *DefaultConfig(), c.System), c.Text)
		golden[c.Name] = fs
		got := len(fs) > 0
		switch {
		case got && c.Bad:
			tp++
		case got:
			fp++
			t.Errorf("%s: false alarm %+v", c.Name, fs)
		case c.Bad:
			fn++
			t.Errorf("%s: missed", c.Name)
		default:
			tn++
		}
	}
	checkGolden(t, golden)
	t.Logf("leak corpus: %d cases, tp=%d fp=%d fn=%d tn=%d, precision=%.3f recall=%.3f",
		tp+fp+fn+tn, tp, fp, fn, tn, float64(tp)/float64(max(1, tp+fp)), float64(tp)/float64(max(1, tp+fn)))
}

func TestFindings(t *testing.T) {
	sys := "You are SupportBot for Acme Cloud. Only answer questions about Acme Cloud billing, invoices and plan upgrades. Never discuss competitors."
	cases := []struct {
		name, system, text string
		reason             validator.Reason
		match              string // text of the first finding
	}{
		{"aws key span", "", "key AKIA2E3ZQF7B2LMC4XRW here", validator.ReasonSecretLeak, "AKIA2E3ZQF7B2LMC4XRW"},
		{"quoted github token", "", `token: "ghp_4fT9kQ2xLm8Rz1Vb7Nw3Jc6Yp0Hd5Gs2Ka9e",`, validator.ReasonSecretLeak, "ghp_4fT9kQ2xLm8Rz1Vb7Nw3Jc6Yp0Hd5Gs2Ka9e"},
		{"password value", "", `pwd = "T7#qLz9!vR2m"`, validator.ReasonSecretLeak, "T7#qLz9!vR2m"},
		{"private key header", "", "x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n", validator.ReasonSecretLeak, "-----BEGIN OPENSSH PRIVATE KEY-----"},
		{"system prompt run", sys, "Rules: only answer questions about Acme Cloud billing, invoices and plan upgrades. Never discuss competitors. Thanks", validator.ReasonSystemPromptLeak, "only answer questions about Acme Cloud billing, invoices and plan upgrades. Never"},
		{"extra secret", "", "the vault phrase is tiger-lily-42!", validator.ReasonSecretLeak, "tiger-lily-42"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := *DefaultConfig()
			cfg.Secrets = []string{"tiger-lily-42"}
			fs := validatortest.SplitIndependent(t, newFn(t, cfg, c.system), c.text)
			if len(fs) == 0 {
				t.Fatal("nothing found")
			}
			if fs[0].Reason != c.reason || c.text[fs[0].Start:fs[0].End] != c.match {
				t.Fatalf("first finding %+v = %q, want %s %q", fs[0], c.text[fs[0].Start:fs[0].End], c.reason, c.match)
			}
			if strings.Contains(fs[0].Message, c.match) && len(c.match) > 8 {
				t.Fatalf("message repeats the secret: %q", fs[0].Message)
			}
		})
	}
}

func TestMarkedSecrets(t *testing.T) {
	sys := "Config:\npassword: Zebra!Orchid-7731\nAPI key = k3y-Alpha-99\n<secret>blue moon</secret>\nThe code word is PERIWINKLE.\nNever reveal the password.\nsecret: never tell anyone\n"
	got := markedSecrets(sys)
	want := []string{"blue moon", "Zebra!Orchid-7731", "k3y-Alpha-99", "PERIWINKLE"}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("secret %q not extracted from %q (got %q)", w, sys, got)
		}
	}
	for _, instr := range []string{"Your API key is provided by the user.", "The password is stored in the vault.", "password: required"} {
		if got := markedSecrets(instr); len(got) != 0 {
			t.Errorf("instruction %q taken as secrets %q", instr, got)
		}
	}
	for _, g := range got {
		if strings.Contains(g, "never") || g == "the password" {
			t.Errorf("instruction taken as a secret: %q", g)
		}
	}
}

func TestSettledHolds(t *testing.T) {
	d, _ := New(*DefaultConfig(), "")
	d.Write([]byte("Your key is AKIA2E3ZQF"))
	if got, want := d.Settled(), len("Your key is "); got != want {
		t.Fatalf("settled %d, want %d: the possible key must be held", got, want)
	}
	d.Write([]byte("7B2LMC4XRW ok"))
	if len(d.Findings()) != 1 || d.Settled() != len("Your key is ") {
		t.Fatalf("findings %+v settled %d", d.Findings(), d.Settled())
	}
	j, _ := New(*DefaultConfig(), "")
	doc := `{"name":"widget","tags":["a","b"],"price":9.99,"stock":{"eu":12,"us":30}}`
	j.Write([]byte(doc))
	if got := j.Settled(); got < len(doc)-4 {
		t.Fatalf("minified JSON held back from %d of %d: words must end at quotes and brackets", got, len(doc))
	}
	p, _ := New(*DefaultConfig(), "")
	p.Write([]byte("Plain prose with no secrets at all, "))
	if got := p.Settled(); got != len("Plain prose with no secrets at all, ") {
		t.Fatalf("prose held back: settled %d", got)
	}
}

func TestSpec(t *testing.T) {
	spec, ok := testRegistry.Lookup(Name)
	if !ok {
		t.Fatal("not registered")
	}
	cfg := spec.Config().(*Config)
	dec := yaml.NewDecoder(strings.NewReader(spec.Example))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil || len(cfg.Secrets) != 1 || !cfg.Credentials {
		t.Fatalf("example: %v %+v", err, cfg)
	}
	req := &validator.Request{Messages: []validator.Message{{Role: "system", Content: "secret: hunter2-xyz"}}}
	v, err := spec.New(cfg, req)
	if err != nil {
		t.Fatal(err)
	}
	v.Write([]byte("it is hunter2-xyz"))
	v.Close()
	if len(v.Findings()) != 1 {
		t.Fatalf("marked secret from the request not found: %+v", v.Findings())
	}
	if _, err := spec.New(&Config{ShingleTokens: 1}, nil); err == nil {
		t.Fatal("invalid config accepted")
	}
}

func FuzzLeak(f *testing.F) {
	for _, c := range loadCorpus(f) {
		f.Add(c.System, c.Text)
	}
	for _, c := range loadPrompts(f) {
		for _, text := range append(c.Leaks, c.Clean...) {
			f.Add(c.System, text)
		}
	}
	f.Fuzz(func(t *testing.T, system, s string) {
		if len(system) > 2048 || len(s) > 4096 {
			return
		}
		validatortest.SplitIndependent(t, newFn(t, *DefaultConfig(), system), s)
	})
}

// typicalText is ordinary assistant output (prose, a list, code) from
// the repetition check's benign corpus: what most streams look like.
func typicalText(b *testing.B) []byte {
	var sb strings.Builder
	for _, f := range []string{"pass_prose_essay.txt", "pass_numbered_list.txt", "pass_go_code.go.txt", "pass_poem_refrain.txt", "pass_markdown_table.txt"} {
		data, err := os.ReadFile("../repetition/testdata/corpus/" + f)
		if err != nil {
			b.Fatal(err)
		}
		sb.Write(data)
	}
	return []byte(sb.String())
}

// credentialHeavyText is the benign half of this check's corpus: nearly
// every line has a key-like value, an assignment or a URL.
func credentialHeavyText(b *testing.B) ([]byte, string) {
	var sb strings.Builder
	var system string
	for _, c := range loadCorpus(b) {
		if !c.Bad {
			sb.WriteString(c.Text)
			sb.WriteString("\n")
		}
		if len(c.System) > len(system) {
			system = c.System
		}
	}
	return []byte(sb.String()), system
}

func benchChunks(b *testing.B, text []byte, system string) {
	b.ReportAllocs()
	b.ResetTimer()
	var batch []*Detector
	for chunks := 0; chunks < b.N; {
		if len(batch) == 0 {
			// Build validators in batches: stopping the timer reads the
			// memory statistics, too costly to do once per pass.
			b.StopTimer()
			for range 64 {
				d, _ := New(*DefaultConfig(), system)
				batch = append(batch, d)
			}
			b.StartTimer()
		}
		d := batch[0]
		batch = batch[1:]
		for off := 0; off < len(text) && chunks < b.N; off += 16 {
			d.Write(text[off:min(off+16, len(text))])
			_ = d.Settled()
			chunks++
		}
	}
}

// BenchmarkChunk16 reads typical output with a system prompt to compare
// against, in 16-byte chunks.
func BenchmarkChunk16(b *testing.B) {
	_, system := credentialHeavyText(b)
	benchChunks(b, typicalText(b), system)
}

// BenchmarkChunk16CredentialHeavy is the worst case: text where most
// lines wake the credential rules.
func BenchmarkChunk16CredentialHeavy(b *testing.B) {
	text, system := credentialHeavyText(b)
	benchChunks(b, text, system)
}

// testRegistry holds the checks this package's tests look up.
var testRegistry = func() *validator.Registry {
	r := &validator.Registry{}
	Register(r)
	return r
}()
