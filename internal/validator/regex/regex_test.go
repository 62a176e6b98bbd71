package regex

import (
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

type span struct{ start, end int }

var cases = []struct {
	name string
	cfg  Config
	text string
	want []span // expected finding spans, in order
}{
	// presets: benign
	{"url benign", Config{DenyPresets: []string{"url"}}, "Go to the settings page and click Save. Version 1.2 is out.", nil},
	{"url benign http word", Config{DenyPresets: []string{"url"}}, "HTTP is a protocol; https is its secure form.", nil},
	{"email benign at sign", Config{DenyPresets: []string{"email"}}, "Meet @ 5pm, user@ or @home are not addresses.", nil},
	{"ipv4 benign", Config{DenyPresets: []string{"ipv4"}}, "Scores were 300.1.2.3 and 1.2.3 in total.", nil},
	{"uuid benign", Config{DenyPresets: []string{"uuid"}}, "The id is 1234-5678 and the date 2024-01-01.", nil},
	{"path benign fraction", Config{DenyPresets: []string{"path"}}, "Use 1/2 cup and/or 3/4 spoon; and/or is fine.", nil},
	{"code fence benign", Config{DenyPresets: []string{"code_fence"}}, "Use `inline code` and ``double`` ticks.", nil},

	// presets: clear failures
	{"url https", Config{DenyPresets: []string{"url"}}, "See https://example.com/a?b=c for details.", []span{{4, 29}}},
	{"url www", Config{DenyPresets: []string{"url"}}, "Visit www.example.org today", []span{{6, 21}}},
	{"url two", Config{DenyPresets: []string{"url"}}, "http://a.io and ftp://files.example.net/x", []span{{0, 11}, {16, 41}}},
	{"url at end", Config{DenyPresets: []string{"url"}}, "link: https://evil.example/payload", []span{{6, 34}}},
	{"email", Config{DenyPresets: []string{"email"}}, "Write to jane.doe+news@mail.example.co.uk please.", []span{{9, 41}}},
	{"ipv4", Config{DenyPresets: []string{"ipv4"}}, "Server at 192.168.10.254:8080", []span{{10, 24}}},
	{"ipv6", Config{DenyPresets: []string{"ipv6"}}, "addr 2001:0db8:85a3:0000:0000:8a2e:0370:7334 ok", []span{{5, 44}}},
	{"uuid", Config{DenyPresets: []string{"uuid"}}, "id=123e4567-e89b-12d3-a456-426614174000.", []span{{3, 39}}},
	{"unix path", Config{DenyPresets: []string{"path"}}, "Edit /etc/nginx/nginx.conf now", []span{{5, 26}}},
	{"home path", Config{DenyPresets: []string{"path"}}, "in ~/.ssh/id_rsa", []span{{3, 16}}},
	{"windows path", Config{DenyPresets: []string{"path"}}, `open C:\Users\bob\secrets.txt`, []span{{5, 29}}},
	{"code fence", Config{DenyPresets: []string{"code_fence"}}, "Here:\n```python\nx=1\n```", []span{{6, 9}, {20, 23}}},

	// custom deny rules
	{"phrase", Config{Deny: []Rule{{Pattern: `(?i)\bas an ai language model\b`, Name: "disclaimer"}}}, "Well, As an AI language model, I cannot.", []span{{6, 29}}},
	{"phrase benign", Config{Deny: []Rule{{Pattern: `(?i)\bas an ai language model\b`}}}, "As an AI language models expert said...", nil},
	{"word boundary split", Config{Deny: []Rule{{Pattern: `\bpassword\b`}}}, "passwords are fine but password: no", []span{{23, 31}}},
	{"literal prefix", Config{Deny: []Rule{{Pattern: `TODO\(\w+\)`}}}, "x TODO(bob) y TODO z", []span{{2, 11}}},
	{"spaces in pattern", Config{Deny: []Rule{{Pattern: `rm -rf /\S*`}}}, "then run rm -rf /tmp/x carefully", []span{{9, 22}}},
	{"multiline anchor", Config{Deny: []Rule{{Pattern: `(?m)^Sure[,!]`}}}, "Ok.\nSure! here\nNot Sure, no", []span{{4, 9}}},
	{"start anchor", Config{Deny: []Rule{{Pattern: `^Sure`}}}, "Sure thing. Sure.", []span{{0, 4}}},
	{"start anchor later", Config{Deny: []Rule{{Pattern: `^Sure`}}}, "Ok. Sure thing.", nil},
	{"end anchor", Config{Deny: []Rule{{Pattern: `bye$`}}}, "bye now, bye", []span{{9, 12}}},
	{"greedy across chunks", Config{Deny: []Rule{{Pattern: `a+`}}}, "xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaay", []span{{1, 35}}},
	{"banned reason", Config{Deny: []Rule{{Pattern: `(?i)\bpandas\b`}}, Reason: validator.ReasonBannedContent}, "import pandas as pd", []span{{7, 13}}},

	// require
	{"require ok", Config{Require: []Rule{{Pattern: `(?m)^Answer: \d+$`, Name: "answer"}}}, "Thinking...\nAnswer: 42\n", nil},
	{"require missing", Config{Require: []Rule{{Pattern: `(?m)^Answer: \d+$`, Name: "answer"}}}, "Thinking...\nThe answer is 42.", []span{{29, 29}}},
	{"require at end", Config{Require: []Rule{{Pattern: `\.$`}}}, "Ends with a period.", nil},
	{"require preset url", Config{RequirePresets: []string{"url"}}, "Source: https://go.dev/doc", nil},
	{"require preset missing", Config{RequirePresets: []string{"url"}}, "No source given", []span{{15, 15}}},
	{"empty output require", Config{Require: []Rule{{Pattern: `x`}}}, "", []span{{0, 0}}},
	{"empty output deny", Config{DenyPresets: []string{"url"}}, "", nil},
}

func compileT(t testing.TB, c Config) *Set {
	t.Helper()
	if c.MaxMatchBytes == 0 {
		c.MaxMatchBytes = 256
	}
	s, err := Compile(&c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRegexTable(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := compileT(t, c.cfg)
			fs := validatortest.SplitIndependent(t, func() validator.Validator { return set.New() }, c.text)
			var got []span
			for _, f := range fs {
				got = append(got, span{f.Start, f.End})
				want := validator.ReasonRegexMismatch
				if c.cfg.Reason != "" {
					want = c.cfg.Reason
				}
				if f.Reason != want || f.Check != Name {
					t.Fatalf("finding %+v, want reason %s", f, want)
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("findings %+v, want spans %v", fs, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("finding %d span %v (%q), want %v", i, got[i], c.text[got[i].start:got[i].end], c.want[i])
				}
			}
		})
	}
}

func TestHoldBack(t *testing.T) {
	set := compileT(t, Config{DenyPresets: []string{"email", "url"}})
	v := set.New()
	v.Write([]byte("Contact the team at "))
	if s := v.Settled(); s != 20 {
		t.Fatalf("settled %d after a word boundary, want 20", s)
	}
	v.Write([]byte("jane.do"))
	if s := v.Settled(); s != 20 {
		t.Fatalf("settled %d inside a possible address, want 20", s)
	}
	v.Write([]byte("e@example.com today"))
	if len(v.Findings()) != 1 || v.Findings()[0].Start != 20 {
		t.Fatalf("findings %+v", v.Findings())
	}
	// A pattern that can match whitespace holds back at most max_match_bytes.
	wide := compileT(t, Config{Deny: []Rule{{Pattern: `(?i)ignore (all )?previous instructions`}}, MaxMatchBytes: 64})
	w := wide.New()
	w.Write([]byte(strings.Repeat("lorem ipsum ", 20)))
	if s := w.Settled(); s != 240-64 {
		t.Fatalf("wide settled %d, want %d", s, 240-64)
	}
	// A literal prefix releases everything without it.
	lit := compileT(t, Config{Deny: []Rule{{Pattern: `BEGIN [A-Z ]+KEY`}}})
	l := lit.New()
	l.Write([]byte("some text with no marker, then BEG"))
	if s := l.Settled(); s != 31 {
		t.Fatalf("literal settled %d, want 31", s)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, c := range map[string]Config{
		"bad pattern":     {Deny: []Rule{{Pattern: `(`}}},
		"backreference":   {Deny: []Rule{{Pattern: `(a)\1`}}},
		"lookahead":       {Deny: []Rule{{Pattern: `a(?=b)`}}},
		"empty pattern":   {Require: []Rule{{Name: "x"}}},
		"unknown preset":  {DenyPresets: []string{"credit_card"}},
		"unknown reason":  {Deny: []Rule{{Pattern: "x"}}, Reason: "nope"},
		"huge max":        {Deny: []Rule{{Pattern: "x"}}, MaxMatchBytes: 1 << 20},
		"negative max":    {Deny: []Rule{{Pattern: "x"}}, MaxMatchBytes: -1},
		"rule bad reason": {Deny: []Rule{{Pattern: "x", Reason: "bad"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Compile(&c); err == nil {
				t.Fatal("accepted")
			} else {
				t.Log(err)
			}
		})
	}
}

func TestSpec(t *testing.T) {
	spec, ok := testRegistry.Lookup(Name)
	if !ok {
		t.Fatal("not registered")
	}
	cfg := spec.Config()
	dec := yaml.NewDecoder(strings.NewReader(spec.Example))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		t.Fatalf("Example: %v", err)
	}
	v, err := spec.New(cfg, &validator.Request{})
	if err != nil || v == nil {
		t.Fatalf("New: %v %v", v, err)
	}
	if v, err := spec.New(spec.Config(), &validator.Request{}); v != nil || err != nil {
		t.Fatalf("empty config applies: %v %v", v, err)
	}
}

func FuzzRegex(f *testing.F) {
	for i, c := range cases {
		f.Add(i, c.text, uint8(5))
	}
	f.Fuzz(func(t *testing.T, i int, text string, split uint8) {
		if i < 0 {
			i = -i
		}
		c := cases[i%len(cases)]
		set := compileT(t, c.cfg)
		whole := set.New()
		whole.Write([]byte(text))
		whole.Close()
		n := int(split%23) + 1
		parts := set.New()
		for j := 0; j < len(text); j += n {
			parts.Write([]byte(text[j:min(j+n, len(text))]))
			if s := parts.Settled(); s > j+n {
				t.Fatalf("settled %d past written", s)
			}
		}
		parts.Close()
		a, b := whole.Findings(), parts.Findings()
		// Soundness of the hold-back and the prefilter: a deny rule whose
		// regexp matches the text (non-empty, shorter than the window)
		// must be reported.
		if len(text) < 200 {
			for _, r := range set.rules {
				if loc := r.re.FindIndex([]byte(text)); !r.require && loc != nil && loc[1] > loc[0] && len(a) == 0 {
					t.Fatalf("rule %s matches %q at %v but no finding", r.name, text, loc)
				}
			}
		}
		if len(a) != len(b) {
			t.Fatalf("rule %s on %q split %d: %+v vs whole %+v", c.name, text, n, b, a)
		}
		for k := range a {
			if a[k] != b[k] {
				t.Fatalf("rule %s on %q split %d: %+v vs whole %+v", c.name, text, n, b, a)
			}
		}
	})
}

var benchText = []byte(strings.Repeat("The quick brown fox jumps over the lazy dog; see the docs for more, version 1.2.3 is out. ", 40))

// BenchmarkChunk16 is the per-chunk cost of the regex check with the url,
// email and path presets plus one custom phrase rule, ~16-byte chunks.
func BenchmarkChunk16(b *testing.B) {
	set := compileT(b, Config{DenyPresets: []string{"url", "email", "path"}, Deny: []Rule{{Pattern: `(?i)\bas an ai language model\b`}}})
	v := set.New()
	off := 0
	b.ReportAllocs()
	for b.Loop() {
		if off+16 > len(benchText) {
			v = set.New()
			off = 0
		}
		v.Write(benchText[off : off+16])
		off += 16
	}
}

// BenchmarkWhole is one ~3.6 KB output through the same rules at once.
func BenchmarkWhole(b *testing.B) {
	set := compileT(b, Config{DenyPresets: []string{"url", "email", "path"}, Deny: []Rule{{Pattern: `(?i)\bas an ai language model\b`}}})
	b.SetBytes(int64(len(benchText)))
	for b.Loop() {
		v := set.New()
		v.Write(benchText)
		v.Close()
	}
}

// TestPresetCorpus measures the presets on a labelled corpus of benign
// near-misses and clear hits (testdata/corpus.jsonl), fed in 7-byte
// chunks, and reports precision and recall per preset. It fails on any
// false alarm or miss: the corpus is the bar the presets are held to.
func TestPresetCorpus(t *testing.T) {
	raw, err := os.ReadFile("testdata/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	type tally struct{ tp, fp, fn, tn int }
	res := map[string]*tally{}
	for i, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var c struct {
			Preset string `json:"preset"`
			Text   string `json:"text"`
			Bad    bool   `json:"bad"`
			// Known names a documented limitation: the error is counted
			// in the figures but does not fail the test.
			Known string `json:"known"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		set := compileT(t, Config{DenyPresets: []string{c.Preset}})
		v := set.New()
		for j := 0; j < len(c.Text); j += 7 {
			v.Write([]byte(c.Text[j:min(j+7, len(c.Text))]))
		}
		v.Close()
		got := len(v.Findings()) > 0
		if res[c.Preset] == nil {
			res[c.Preset] = &tally{}
		}
		r := res[c.Preset]
		switch {
		case got && c.Bad:
			r.tp++
		case got && !c.Bad:
			r.fp++
			if c.Known == "" {
				t.Errorf("%s false alarm on %q: %+v", c.Preset, c.Text, v.Findings())
			} else {
				t.Logf("%s known false alarm on %q (%s)", c.Preset, c.Text, c.Known)
			}
		case !got && c.Bad:
			r.fn++
			if c.Known == "" {
				t.Errorf("%s missed %q", c.Preset, c.Text)
			}
		default:
			r.tn++
		}
	}
	names := make([]string, 0, len(res))
	for n := range res {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		r := res[n]
		p := float64(r.tp) / float64(max(1, r.tp+r.fp))
		rc := float64(r.tp) / float64(max(1, r.tp+r.fn))
		t.Logf("%-10s precision %.2f recall %.2f (tp %d fp %d fn %d tn %d)", n, p, rc, r.tp, r.fp, r.fn, r.tn)
	}
}

// testRegistry holds the checks this package's tests look up.
var testRegistry = func() *validator.Registry {
	r := &validator.Registry{}
	Register(r)
	return r
}()
