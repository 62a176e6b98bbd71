package repetition

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
	"go.yaml.in/yaml/v3"
)

var tableCases = []struct {
	name string
	text string
	bad  bool
}{
	{"empty", "", false},
	{"short answer", "Paris is the capital of France.", false},
	{"very very", "It is very very good, really really good.", false},
	{"eight the", strings.Repeat("the ", 8), false},
	{"thirty the", strings.Repeat("the ", 30), true},
	{"case-folded loop", strings.Repeat("The THE the ", 12), true},
	{"numbered lines", func() string {
		var b strings.Builder
		for i := 1; i <= 60; i++ {
			fmt.Fprintf(&b, "%d. Item number %d\n", i, i)
		}
		return b.String()
	}(), false},
	{"indexed assignments", func() string {
		var b strings.Builder
		for i := 0; i < 80; i++ {
			fmt.Fprintf(&b, "x[%d] = y[%d] * 2;\n", i, i)
		}
		return b.String()
	}(), false},
	{"same assignment forever", strings.Repeat("x[0] = y[0] * 2;\n", 20), true},
	{"sentence twice", "I can't help with that. I can't help with that.", false},
	{"sentence loop", strings.Repeat("I can't help with that. ", 10), true},
	{"long row of pipes", strings.Repeat("| ", 40) + "\n", false},
	{"endless pipes", strings.Repeat("|", 600), true},
	{"blank lines", "a\n\n\n\nb\n\n\nc", false},
	{"endless newlines", "done" + strings.Repeat("\n", 800), true},
	{"unicode word loop", strings.Repeat("привет ", 40), true},
	{"cjk without spaces", strings.Repeat("你好世界", 10), false}, // one word token: nothing repeats
	{"cjk punctuated loop", strings.Repeat("你好，", 40), true},
	{"restart", "Tom had a dog named Rex. Rex liked to run in the park every morning with Tom and his sister, and then they ate apples. " +
		"One day Rex found a ball. Tom had a dog named Rex. Rex liked to run in the park every morning with Tom and his sister, and then they ate apples. One day Rex found a ball", true},
	{"restart too short to be sure", "Tom had a dog named Rex. Rex liked to run in the park. " +
		"One day Rex found a ball and ran home. Tom had a dog named Rex. Rex liked to run in the park. The end.", false},
	{"quoted line twice far apart", "Remember: \"measure twice, cut once, and always keep your tools sharp and clean\". " +
		"Sharp tools are safer because they need less force. Clean tools last longer. Dull blades slip. Rust eats edges. Oil them in winter. " + "Remember: \"measure twice, cut once, and always keep your tools sharp and clean\".", false},
	{"invalid utf8", "abc\xff\xfe def \xe2\x82 ghi", false},
	{"loop of words sharing prefixes", strings.Repeat("th the then them they ", 10), true},
	{"loop that starts mid-word of a new word", "Therapists th" + strings.Repeat("e therapy the therapist ", 10), true},
	{"growing words", "a ab abc abcd abcde abcdef abcdefg abcdefgh abcdefghi abcdefghij", false},
}

func TestTable(t *testing.T) {
	for _, c := range tableCases {
		t.Run(c.name, func(t *testing.T) {
			fs := validatortest.SplitIndependent(t, newDefault, c.text)
			if (len(fs) > 0) != c.bad {
				t.Fatalf("bad=%v, findings %+v", c.bad, fs)
			}
			for _, f := range fs {
				if f.Reason != validator.ReasonRepetitionLoop || f.Check != Name {
					t.Fatalf("finding %+v", f)
				}
			}
		})
	}
}

// TestCaughtEarly checks the latency promise: a loop is found within about
// 64 tokens (256 bytes at 4 bytes a token) of where the repetition begins,
// and the finding starts where the repetition begins.
func TestCaughtEarly(t *testing.T) {
	units := []string{
		"the ",
		"and then ",
		"I am not sure. ",
		"Error: timeout while waiting for the server.\n",
		"The process failed because the lock file exists and nobody removed it.\n",
		"| col | col |\n",
	}
	for _, u := range units {
		prefix := "Here is my answer, as requested: "
		text := prefix + strings.Repeat(u, 200)
		d := newDefault().(*Detector)
		d.Write([]byte(text))
		fs := d.Findings()
		if len(fs) != 1 {
			t.Fatalf("%q: no loop found", u)
		}
		loopStart := len(prefix) + len(u) // the first recurrence
		if fs[0].Start < len(prefix) || fs[0].Start > loopStart {
			t.Errorf("%q: finding starts at %d, loop begins at %d", u, fs[0].Start, loopStart)
		}
		if late := fs[0].End - loopStart; late > 64*4 {
			t.Errorf("%q: found %d bytes after the loop began", u, late)
		}
	}
}

func TestSettledHoldsOnlyTheTail(t *testing.T) {
	d := newDefault().(*Detector)
	// Every token is new: nothing can repeat yet, so nothing is held.
	text := "Renewable energy has grown quickly over the last decade, and storage is next. "
	d.Write([]byte(text))
	if s := d.Settled(); s != len(text) {
		t.Fatalf("settled %d of %d: all-new text must be released whole", s, len(text))
	}
	// A tail that starts with a token seen before may begin a repeat: it
	// is held from that token, and only the last few tokens are.
	more := "Energy prices fell when the storage market grew. "
	d.Write([]byte(more))
	text += more
	if s := d.Settled(); s < len(text)-60 || s >= len(text) {
		t.Fatalf("settled %d of %d: want only the last few tokens held", s, len(text))
	}
	// A repeat in progress holds back from where it began.
	d.Write([]byte("I can't help with that. I can't help with that. I can't"))
	if s := d.Settled(); s > len(text)+len("I can't help with that. ") {
		t.Fatalf("settled %d released part of the repeat that began at %d", s, len(text)+len("I can't help with that. "))
	}
	d.Close()
	if len(d.Findings()) != 0 || d.Settled() != d.tok.off {
		t.Fatalf("after Close: %+v settled %d", d.Findings(), d.Settled())
	}
}

// TestSettledReleasesNewWordsLetterByLetter checks the hold on the token
// being read: its letters flow while what has come of it begins no earlier
// token, and wait while it could still turn out to equal one.
func TestSettledReleasesNewWordsLetterByLetter(t *testing.T) {
	steps := []struct {
		feed string
		held string // the tail of the output still held after feed
	}{
		{"\"", ""},                 // a symbol no earlier token began with
		{"H", ""},                  // the first letter of the first word
		{"e", ""},                  // nothing began with "he" before
		{"re, ", ""},               // "here" and "," are new tokens
		{"h", "h"},                 // "here" began with "h": this may be "here" again
		{"e", "he"},                // ... or "he", a prefix of "here"
		{"l", ""},                  // no earlier token began with "hel"
		{"lo Tim", ""},             // "hello", "tim": new
		{"e. ", ""},                // "time", ".": new
		{"Her", "Her"},             // every prefix of "here" again: held
		{"e", "Here"},              // equal to an earlier token...
		{"s", ""},                  // "heres" is not
		{" t", "t"},                // "t" began "tim"
		{"ime", "time"},            // now equal to "time"
		{" ", "time "},             // a finished token seen before: it may begin a repeat
		{"x", "time x"},            // a new token after it does not release it
		{"\u00e9", "time x\u00e9"}, // nor does a new letter of the word being read
	}
	d := newDefault().(*Detector)
	var text string
	for _, st := range steps {
		d.Write([]byte(st.feed))
		text += st.feed
		if got := text[d.Settled():]; got != st.held {
			t.Fatalf("after %q: held %q, want %q", text, got, st.held)
		}
	}
	// A cut rune is held even inside a novel word.
	d2 := newDefault().(*Detector)
	d2.Write([]byte("Gr\xc3"))
	if s := d2.Settled(); s != 2 {
		t.Fatalf("settled %d with a cut rune after \"Gr\", want 2", s)
	}
	d2.Write([]byte("\xbcn"))
	if s := d2.Settled(); s != len("Gr\u00fcn") {
		t.Fatalf("settled %d after \"Gr\u00fcn\", want %d", s, len("Gr\u00fcn"))
	}
}

func TestSpecExampleDecodes(t *testing.T) {
	spec, ok := testRegistry.Lookup(Name)
	if !ok {
		t.Fatal("not registered")
	}
	cfg := spec.Config().(*Config)
	dec := yaml.NewDecoder(strings.NewReader(spec.Example))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		t.Fatalf("example: %v", err)
	}
	if *cfg != *DefaultConfig() {
		t.Fatalf("example %+v differs from the defaults %+v", *cfg, *DefaultConfig())
	}
	var j Config
	if err := json.Unmarshal([]byte(`{"min_repeats": 4, "max_period_tokens": 256}`), &j); err != nil || j.MinRepeats != 4 {
		t.Fatalf("json: %v %+v", err, j)
	}
	if _, err := spec.New(&Config{MinPeriodTokens: 0}, nil); err == nil {
		t.Fatal("invalid config accepted")
	}
	v, err := spec.New(nil, nil)
	if err != nil || v.Name() != Name {
		t.Fatal(v, err)
	}
}

func FuzzRepetition(f *testing.F) {
	for _, c := range tableCases {
		f.Add(c.text)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return
		}
		validatortest.SplitIndependent(t, newDefault, s)
	})
}

// realistic is about 2 KB of mixed prose, list and code, read in 16-byte
// chunks by the benchmark (about four tokens per chunk).
func realistic() string {
	b, _ := readCorpusFile("pass_prose_essay.txt")
	c, _ := readCorpusFile("pass_go_code.go.txt")
	l, _ := readCorpusFile("pass_numbered_list.txt")
	return b + c + l
}

func BenchmarkChunk16(b *testing.B) {
	text := []byte(realistic())
	const chunk = 16
	b.ReportAllocs()
	b.ResetTimer()
	chunks := 0
	var batch []validator.Validator
	for chunks < b.N {
		if len(batch) == 0 {
			// Build validators in batches: stopping the timer reads the
			// memory statistics, too costly to do once per pass.
			b.StopTimer()
			for range 64 {
				batch = append(batch, newDefault())
			}
			b.StartTimer()
		}
		d := batch[0]
		batch = batch[1:]
		for off := 0; off < len(text) && chunks < b.N; off += chunk {
			d.Write(text[off:min(off+chunk, len(text))])
			_ = d.Settled()
			chunks++
		}
	}
}

func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = newDefault()
	}
}

// TestLlamaStoryLoop streams stories260K at temperature 0 from the real
// llama-server: after about 250 tokens the story starts over from the
// beginning, a real block loop that must be caught while streaming.
func TestLlamaStoryLoop(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	body := `{"prompt":"Once upon a time","temperature":0,"n_predict":480,"stream":true,"cache_prompt":false}`
	req, err := http.NewRequest("POST", env.LlamaCPUURL+"/completion", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := testbed.HTTPClient.Do(req)
	if err != nil {
		t.Fatalf("llama-server: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("llama-server: %s", resp.Status)
	}
	d := newDefault().(*Detector)
	var out strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	chunks, foundAtChunk := 0, -1
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Content string `json:"content"`
			Stop    bool   `json:"stop"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("bad event %q: %v", line, err)
		}
		out.WriteString(ev.Content)
		d.Write([]byte(ev.Content))
		chunks++
		if foundAtChunk < 0 && len(d.Findings()) > 0 {
			foundAtChunk = chunks
		}
		if ev.Stop {
			break
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	text := out.String()
	fs := d.Findings()
	if len(fs) != 1 {
		t.Fatalf("no loop found in %d chunks:\n%s", chunks, text)
	}
	f := fs[0]
	restart := strings.Index(text, "Once upon a time")
	if restart < 0 {
		t.Fatalf("the model did not start over this time:\n%s", text)
	}
	if f.Start < restart-1 || f.Start > restart+len("Once upon a time")+2 {
		t.Errorf("finding starts at %d (%q), the story restarts at %d", f.Start, text[f.Start:min(f.Start+30, len(text))], restart)
	}
	t.Logf("story restarts at byte %d; loop found at chunk %d of %d (byte %d, %d bytes after the restart): %s",
		restart, foundAtChunk, chunks, f.End, f.End-restart, f.Message)
	if f.End-restart > 64*4 {
		t.Errorf("found %d bytes after the restart, want within about 64 tokens", f.End-restart)
	}
	// The same text fed in other splits gives the same finding.
	got := validatortest.SplitIndependent(t, newDefault, text)
	if len(got) != 1 || got[0] != f {
		t.Errorf("offline %+v, streamed %+v", got, f)
	}
}

func TestRandomSplitsOfCorpus(t *testing.T) {
	// Beyond the fixed splits of SplitIndependent: many random splits of
	// the failing corpus give the same finding.
	r := rand.New(rand.NewPCG(7, 11))
	for _, c := range loadCorpus(t) {
		want, _ := validatortest.Run(t, newDefault(), c.text, []int{len(c.text)})
		for k := 0; k < 20; k++ {
			var sizes []int
			for left := len(c.text); left > 0; {
				n := 1 + r.IntN(64)
				sizes = append(sizes, n)
				left -= n
			}
			got, _ := validatortest.Run(t, newDefault(), c.text, sizes)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s: split %v gives %+v, want %+v", c.name, sizes, got, want)
			}
		}
	}
}

// TestPooledTablesStartClean: a detector built on tables a closed one gave
// back finds exactly what a detector on fresh tables finds.
func TestPooledTablesStartClean(t *testing.T) {
	loop := "Here is my answer: " + strings.Repeat("I can't help with that. ", 10)
	clean := "Renewable energy has grown quickly over the last decade, and storage is next."
	for range 3 {
		d := newDefault().(*Detector)
		d.Write([]byte(loop))
		d.Close() // its tables, full of the loop's hashes, go back to the pool
		if len(d.Findings()) != 1 || d.Settled() != d.Findings()[0].Start {
			t.Fatalf("loop: %+v settled %d", d.Findings(), d.Settled())
		}
		e := newDefault().(*Detector)
		e.Write([]byte(clean))
		if s := e.Settled(); s != len(clean) {
			t.Fatalf("a detector on reused tables holds back %q: it remembers the last output", clean[s:])
		}
		e.Close()
		if len(e.Findings()) != 0 {
			t.Fatalf("findings on clean text: %+v", e.Findings())
		}
	}
}

// testRegistry holds the checks this package's tests look up.
var testRegistry = func() *validator.Registry {
	r := &validator.Registry{}
	Register(r)
	return r
}()

// TestClosedTablesAreZero: a closed detector hands its tables back all
// zero, whether it read a short answer, found a loop, or read more tokens
// than its ring holds (the pool hands them out without clearing them).
func TestClosedTablesAreZero(t *testing.T) {
	var long strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&long, "w%d ", i) // all different: no loop, the ring wraps
	}
	for _, tc := range []struct{ name, text string }{
		{"short answer", "Renewable energy has grown quickly over the last decade, and storage is next."},
		{"loop found", "Here is my answer: " + strings.Repeat("I can't help with that. ", 10)},
		{"ring wrapped", long.String()},
		{"symbols", strings.Repeat("{[(<>)]}", 300)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDefault().(*Detector)
			b := d.bufs
			d.Write([]byte(tc.text))
			d.Close()
			for name, tab := range map[string][]uint64{"hashes": b.hashes, "kh": b.kh, "seen": b.seen, "prefixes": b.prefixes} {
				for i, v := range tab {
					if v != 0 {
						t.Fatalf("%s[%d] = %#x after Close", name, i, v)
					}
				}
			}
			for i, v := range b.table {
				if v != 0 {
					t.Fatalf("table[%d] = %d after Close", i, v)
				}
			}
		})
	}
}

// BenchmarkShortAnswer is one request's detector over a short answer:
// built on pooled tables, fed, closed (its tables cleared for the next).
func BenchmarkShortAnswer(b *testing.B) {
	var sb strings.Builder
	for i := range 128 {
		fmt.Fprintf(&sb, "word%d ", i) // no loop: the whole answer is read
	}
	text := []byte(sb.String())
	b.ReportAllocs()
	for b.Loop() {
		d := newDefault().(*Detector)
		d.Write(text)
		d.Close()
	}
}

// byteTokens is the tokenizer's output for p fed one byte at a time, the
// ASCII bytes through its general path (ascii), the others and those
// that end a cut rune through write (where a word's letters never follow).
func byteTokens(p []byte) [][3]uint64 {
	var out [][3]uint64
	emit := func(h uint64, start, end int) { out = append(out, [3]uint64{h, uint64(start), uint64(end)}) }
	t := tokenizer{prefixes: make([]uint64, 1<<prefixBits/64)}
	for _, c := range p {
		if c < utf8.RuneSelf && t.ncarry == 0 {
			t.ascii(c, t.off, emit)
			t.off++
			continue
		}
		t.write([]byte{c}, emit)
	}
	t.flush(emit)
	return out
}

func writeTokens(p []byte) [][3]uint64 {
	var out [][3]uint64
	emit := func(h uint64, start, end int) { out = append(out, [3]uint64{h, uint64(start), uint64(end)}) }
	t := tokenizer{prefixes: make([]uint64, 1<<prefixBits/64)}
	t.write(p, emit)
	t.flush(emit)
	return out
}

// FuzzTokenizerWordBytes holds the tokenizer's fast path for the letters
// of a word to the general one, byte for byte, on every input.
func FuzzTokenizerWordBytes(f *testing.F) {
	for _, c := range tableCases {
		f.Add([]byte(c.text))
	}
	for _, c := range loadCorpus(f) {
		f.Add([]byte(c.text))
	}
	f.Add([]byte("Hello, World_42 -- ---- naïve Straße\n\tEND"))
	f.Fuzz(func(t *testing.T, p []byte) {
		if got, want := writeTokens(p), byteTokens(p); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q: tokens %v, byte by byte %v", p, got, want)
		}
	})
}
