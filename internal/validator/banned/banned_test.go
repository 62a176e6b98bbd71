package banned

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
	"go.yaml.in/yaml/v3"
)

type corpusCase struct {
	Name   string `json:"name"`
	Config Config `json:"config"`
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
	for sc.Scan() {
		var c corpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func newFn(t testing.TB, cfg Config) func() validator.Validator {
	return func() validator.Validator {
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

func TestCorpusPrecisionRecall(t *testing.T) {
	var tp, fp, fn, tn int
	golden := map[string][]validator.Finding{}
	for _, c := range loadCorpus(t) {
		fs := validatortest.SplitIndependent(t, newFn(t, c.Config), c.Text)
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
	t.Logf("banned corpus: %d cases, tp=%d fp=%d fn=%d tn=%d, precision=%.3f recall=%.3f",
		tp+fp+fn+tn, tp, fp, fn, tn, float64(tp)/float64(max(1, tp+fp)), float64(tp)/float64(max(1, tp+fn)))
}

func TestFindingLocation(t *testing.T) {
	cases := []struct {
		name, text string
		cfg        Config
		want       []string // the matched text of each finding
	}{
		{"term", "Say Lorem  Ipsum now", Config{Terms: []string{"lorem ipsum"}}, []string{"Lorem  Ipsum"}},
		{"two terms in order", "b a", Config{Terms: []string{"a", "b"}}, []string{"b", "a"}},
		{"overlapping terms", "credit card number", Config{Terms: []string{"credit card", "card number"}}, []string{"credit card", "card number"}},
		{"import name", "x\nimport pandas as pd\n", Config{Libraries: []string{"pandas"}}, []string{"pandas"}},
		{"require name", "const a = require(\"axios\")", Config{Libraries: []string{"axios"}}, []string{"axios"}},
		{"go block path", "import (\n\t\"github.com/pkg/errors\"\n)", Config{Libraries: []string{"errors"}}, []string{"github.com/pkg/errors"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := validatortest.SplitIndependent(t, newFn(t, c.cfg), c.text)
			var got []string
			for _, f := range fs {
				got = append(got, c.text[f.Start:f.End])
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("matched %q, want %q", got, c.want)
			}
		})
	}
}

func TestSettledHoldsOnlyPossibleMatch(t *testing.T) {
	m, _ := New(Config{Terms: []string{"secret sauce"}, Libraries: []string{"pandas"}})
	m.Write([]byte("The recipe has no secret sa"))
	if got, want := m.Settled(), strings.Index("The recipe has no secret sa", "secret"); got != want {
		t.Fatalf("settled %d, want %d (start of the possible match)", got, want)
	}
	m.Write([]byte("lad.\nUse it "))
	if got, want := m.Settled(), len("The recipe has no secret salad.\nUse it "); got != want {
		t.Fatalf("settled %d, want everything (%d): prose line cannot be an import", got, want)
	}
	m.Write([]byte("\nimport pan"))
	if got, want := m.Settled(), len("The recipe has no secret salad.\nUse it \n"); got != want {
		t.Fatalf("settled %d, want the start of the import line %d", got, want)
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
	if err := dec.Decode(cfg); err != nil || len(cfg.Terms) != 2 || len(cfg.Libraries) != 2 {
		t.Fatalf("example: %v %+v", err, cfg)
	}
	if v, err := spec.New(DefaultConfig(), nil); v != nil || err != nil {
		t.Fatal("empty config should not run")
	}
	if _, err := spec.New(&Config{Terms: []string{"  "}}, nil); err == nil {
		t.Fatal("empty term accepted")
	}
}

func FuzzBanned(f *testing.F) {
	for _, c := range loadCorpus(f) {
		f.Add(c.Text)
	}
	cfg := Config{Terms: []string{"as an ai", "lorem ipsum", "c++", "straße", "x"}, Libraries: []string{"pandas", "lodash", "serde", "errors", "conio", "dplyr"}}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return // byte-by-byte splits make long inputs slow; 4 KiB covers every state
		}
		validatortest.SplitIndependent(t, newFn(t, cfg), s)
	})
}

func benchText(b *testing.B) []byte {
	var sb strings.Builder
	for _, c := range loadCorpus(b) {
		if !c.Bad {
			sb.WriteString(c.Text)
			sb.WriteString("\n")
		}
	}
	return []byte(sb.String())
}

// typicalText is ordinary assistant output (prose, a list, code) from
// the repetition check's benign corpus.
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

func benchChunks(b *testing.B, cfg Config) {
	benchChunksOf(b, cfg, benchText(b))
}

func benchChunksOf(b *testing.B, cfg Config, text []byte) {
	b.ReportAllocs()
	b.ResetTimer()
	var batch []*Matcher
	for chunks := 0; chunks < b.N; {
		if len(batch) == 0 {
			// Build validators in batches: stopping the timer reads the
			// memory statistics, too costly to do once per pass.
			b.StopTimer()
			for range 64 {
				m, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				batch = append(batch, m)
			}
			b.StartTimer()
		}
		m := batch[0]
		batch = batch[1:]
		for off := 0; off < len(text) && chunks < b.N; off += 16 {
			m.Write(text[off:min(off+16, len(text))])
			_ = m.Settled()
			chunks++
		}
	}
}

// BenchmarkChunk16Terms matches 1,000 terms: the cost per chunk must not
// grow with the number of terms.
func BenchmarkChunk16Terms(b *testing.B) {
	var terms []string
	for i := 0; i < 1000; i++ {
		terms = append(terms, fmt.Sprintf("forbidden phrase %d", i))
	}
	terms = append(terms, "as an AI language model", "lorem ipsum")
	benchChunks(b, Config{Terms: terms})
}

func BenchmarkChunk16TermsAndLibraries(b *testing.B) {
	benchChunks(b, Config{Terms: []string{"as an AI language model", "lorem ipsum"}, Libraries: []string{"pandas", "lodash", "serde"}})
}

// BenchmarkChunk16Typical is the common case: terms and libraries banned,
// ordinary prose and code streaming past.
func BenchmarkChunk16Typical(b *testing.B) {
	benchChunksOf(b, Config{Terms: []string{"as an AI language model", "lorem ipsum"}, Libraries: []string{"pandas", "lodash", "serde"}}, typicalText(b))
}

// testRegistry holds the checks this package's tests look up.
var testRegistry = func() *validator.Registry {
	r := &validator.Registry{}
	Register(r)
	return r
}()
