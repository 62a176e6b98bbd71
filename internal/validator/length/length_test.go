package length

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

func counts(text string) [6]int {
	c := New(Config{})
	c.Write([]byte(text))
	c.Close()
	w, s, ch, tk, l, p := c.Counts()
	return [6]int{w, s, ch, tk, l, p}
}

func TestCounts(t *testing.T) {
	cases := []struct {
		name string
		text string
		want [6]int // words, sentences, chars, tokens, lines, paragraphs
	}{
		{"empty", "", [6]int{0, 0, 0, 0, 0, 0}},
		{"one word", "hello", [6]int{1, 1, 5, 2, 1, 1}},
		{"two sentences", "Hi there. How are you?", [6]int{5, 2, 22, 7, 1, 1}},
		{"abbreviation", "Use e.g. this one.", [6]int{4, 1, 18, 5, 1, 1}},
		{"lines and paragraphs", "a\nb\n\nc", [6]int{3, 2, 6, 3, 4, 2}},
		{"trailing newline", "a\n", [6]int{1, 1, 2, 1, 1, 1}},
		{"symbols only", "--- * ---", [6]int{0, 0, 9, 2, 1, 1}},
		{"list", "1. one\n2. two", [6]int{4, 1, 13, 5, 2, 1}},
		{"unicode", "héllo wörld", [6]int{2, 1, 11, 3, 1, 1}},
		{"cjk", "我喜欢猫。它们很可爱。", [6]int{2, 2, 11, 6, 1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := counts(c.text); got != c.want {
				t.Fatalf("counts(%q) = %v, want %v", c.text, got, c.want)
			}
		})
	}
}

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

func TestCorpusPrecisionRecall(t *testing.T) {
	var tp, fp, fn, tn int
	golden := map[string][]validator.Finding{}
	for _, c := range loadCorpus(t) {
		cfg := c.Config
		fs := validatortest.SplitIndependent(t, func() validator.Validator { return New(cfg) }, c.Text)
		golden[c.Name] = fs
		got := len(fs) > 0
		switch {
		case got && c.Bad:
			tp++
		case got:
			fp++
			t.Errorf("%s: false alarm %+v (counts %v)", c.Name, fs, counts(c.Text))
		case c.Bad:
			fn++
			t.Errorf("%s: missed (counts %v)", c.Name, counts(c.Text))
		default:
			tn++
		}
	}
	checkGolden(t, golden)
	t.Logf("length corpus: %d cases, tp=%d fp=%d fn=%d tn=%d, precision=%.3f recall=%.3f",
		tp+fp+fn+tn, tp, fp, fn, tn, float64(tp)/float64(max(1, tp+fp)), float64(tp)/float64(max(1, tp+fn)))
}

func TestCrossingPoint(t *testing.T) {
	text := "one two three four five six"
	c := New(Config{MaxWords: 4})
	fs := validatortest.SplitIndependent(t, func() validator.Validator { return New(Config{MaxWords: 4}) }, text)
	if len(fs) != 1 || fs[0].Start != strings.Index(text, "five") || fs[0].End != fs[0].Start+1 {
		t.Fatalf("findings %+v", fs)
	}
	c.Write([]byte("one two three four "))
	if c.Settled() != 19 {
		t.Fatalf("settled %d before the crossing, want all 19", c.Settled())
	}
	c.Write([]byte("five six"))
	if c.Settled() != 19 {
		t.Fatalf("settled %d after the crossing, want the crossing point 19", c.Settled())
	}
	// Minimum words: an empty range at the end.
	m := validatortest.SplitIndependent(t, func() validator.Validator { return New(Config{MinWords: 5}) }, "too short")
	if len(m) != 1 || m[0].Start != 9 || m[0].End != 9 {
		t.Fatalf("min words %+v", m)
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
	if err := dec.Decode(cfg); err != nil || cfg.MaxWords != 50 || cfg.MaxParagraphs != 2 {
		t.Fatalf("example: %v %+v", err, cfg)
	}
	if v, err := spec.New(DefaultConfig(), nil); v != nil || err != nil {
		t.Fatalf("all limits off should not run: %v %v", v, err)
	}
	if _, err := spec.New(&Config{MaxWords: -1}, nil); err == nil {
		t.Fatal("negative limit accepted")
	}
	if _, err := spec.New(&Config{MaxWords: 5, MinWords: 9}, nil); err == nil {
		t.Fatal("min above max accepted")
	}
}

var allLimits = Config{MaxWords: 40, MinWords: 3, MaxSentences: 4, MaxChars: 300, MaxTokens: 70, MaxLines: 6, MaxParagraphs: 2}

func FuzzLength(f *testing.F) {
	for _, c := range loadCorpus(f) {
		f.Add(c.Text)
	}
	f.Add("a\xffb\xe2\x82 c")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return // byte-by-byte splits make long inputs slow; 4 KiB covers every state
		}
		validatortest.SplitIndependent(t, func() validator.Validator { return New(allLimits) }, s)
	})
}

func BenchmarkChunk16(b *testing.B) {
	var sb strings.Builder
	for _, c := range loadCorpus(b) {
		sb.WriteString(c.Text)
		sb.WriteString("\n\n")
	}
	text := []byte(sb.String())
	cfg := Config{MaxWords: 1 << 30, MaxSentences: 1 << 30, MaxChars: 1 << 30, MaxTokens: 1 << 30, MaxLines: 1 << 30, MaxParagraphs: 1 << 30}
	b.ReportAllocs()
	b.ResetTimer()
	for chunks := 0; chunks < b.N; {
		c := New(cfg)
		for off := 0; off < len(text) && chunks < b.N; off += 16 {
			c.Write(text[off:min(off+16, len(text))])
			_ = c.Settled()
			chunks++
		}
	}
}

// testRegistry holds the checks this package's tests look up.
var testRegistry = func() *validator.Registry {
	r := &validator.Registry{}
	Register(r)
	return r
}()
