package instruct

import (
	"math/rand/v2"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

type tcase struct {
	name   string
	check  string
	cfg    func() any // nil: spec default
	mutate func(cfg any)
	text   string
	fail   bool
}

func newCheck(t testing.TB, tc tcase) validator.Validator {
	t.Helper()
	spec, ok := testRegistry.Lookup(tc.check)
	if !ok {
		t.Fatalf("check %s not registered", tc.check)
	}
	var cfg any
	if spec.Config != nil {
		cfg = spec.Config()
		if tc.mutate != nil {
			tc.mutate(cfg)
		}
	}
	v, err := spec.New(cfg, &validator.Request{})
	if err != nil || v == nil {
		t.Fatalf("New %s: %v %v", tc.check, v, err)
	}
	return v
}

var cases = []tcase{
	{"no commas ok", "no_commas", nil, nil, "One two three. Four five.", false},
	{"comma", "no_commas", nil, nil, "One, two.", true},
	{"full-width comma", "no_commas", nil, nil, "一，二", true},
	{"lower ok", "letter_case", nil, func(c any) { c.(*CaseConfig).Case = "lower" }, "all lower case here, née", false},
	{"lower fails", "letter_case", nil, func(c any) { c.(*CaseConfig).Case = "lower" }, "all lower But not this", true},
	{"lower fails unicode", "letter_case", nil, func(c any) { c.(*CaseConfig).Case = "lower" }, "déjà Ébène", true},
	{"upper ok", "letter_case", nil, func(c any) { c.(*CaseConfig).Case = "upper" }, "ALL CAPS 123!", false},
	{"upper fails", "letter_case", nil, func(c any) { c.(*CaseConfig).Case = "upper" }, "ALL CAPS but", true},
	{"quoted ok", "quoted", nil, nil, "  \"Hello there.\"\n", false},
	{"quoted curly ok", "quoted", nil, nil, "“Hello there.”", false},
	{"quoted open missing", "quoted", nil, nil, "Hello there.\"", true},
	{"quoted close missing", "quoted", nil, nil, "\"Hello there.", true},
	{"end phrase ok", "end_phrase", nil, func(c any) { c.(*PhraseConfig).Phrase = "Any questions?" }, "Text.\nany questions?  ", false},
	{"end phrase missing", "end_phrase", nil, func(c any) { c.(*PhraseConfig).Phrase = "Any questions?" }, "Any questions? More text.", true},
	{"title ok", "title", nil, nil, "<<My Poem>>\nRoses...", false},
	{"title missing", "title", nil, nil, "My Poem\nRoses...", true},
	{"postscript ok", "postscript", nil, nil, "Body.\n\nP.S. see you", false},
	{"postscript pps", "postscript", nil, func(c any) { c.(*PostscriptConfig).Marker = "P.P.S" }, "Body.\nP.P.S later", false},
	{"postscript missing", "postscript", nil, nil, "Body only.", true},
	{"bullets exact", "bullets", nil, func(c any) { c.(*CountConfig).Exactly = 2 }, "* one\n* two\n", false},
	{"bullets wrong", "bullets", nil, func(c any) { c.(*CountConfig).Exactly = 2 }, "* one\n- two\n* three", true},
	{"placeholders ok", "placeholders", nil, func(c any) { c.(*CountConfig).Min = 2 }, "Dear [name], at [address].", false},
	{"placeholders few", "placeholders", nil, func(c any) { c.(*CountConfig).Min = 2 }, "Dear [name].", true},
	{"highlights ok", "highlights", nil, func(c any) { c.(*CountConfig).Min = 2 }, "*one* and **two**", false},
	{"highlights few", "highlights", nil, func(c any) { c.(*CountConfig).Min = 2 }, "*one* and two", true},
	{"capital words max", "capital_words", nil, func(c any) { c.(*CountConfig).Max = 1 }, "USE the FORCE", true},
	{"capital words ok", "capital_words", nil, func(c any) { c.(*CountConfig).Max = 2 }, "USE the FORCE", false},
	{"sentences min", "sentences", nil, func(c any) { c.(*CountConfig).Min = 3 }, "One. Two! Three?", false},
	{"sentences few", "sentences", nil, func(c any) { c.(*CountConfig).Min = 3 }, "Dr. Smith met Mr. Jones. Then left", true},
	{"sections ok", "sections", nil, func(c any) { c.(*SectionsConfig).Splitter = "SECTION"; c.(*SectionsConfig).Min = 2 }, "SECTION 1\na\nSECTION 2\nb", false},
	{"sections few", "sections", nil, func(c any) { c.(*SectionsConfig).Splitter = "SECTION"; c.(*SectionsConfig).Min = 2 }, "SECTION 1\na", true},
	{"paragraphs divider", "paragraphs", nil, func(c any) { p := c.(*ParagraphsConfig); p.Exactly, p.Divider = 2, "***" }, "One.\n***\nTwo.", false},
	{"paragraphs wrong", "paragraphs", nil, func(c any) { p := c.(*ParagraphsConfig); p.Exactly, p.Divider = 3, "***" }, "One.\n***\nTwo.", true},
	{"first word", "paragraphs", nil, func(c any) { p := c.(*ParagraphsConfig); p.Nth, p.FirstWord = 2, "weekend" }, "Hi.\n\nWeekend plans.", false},
	{"first word wrong", "paragraphs", nil, func(c any) { p := c.(*ParagraphsConfig); p.Nth, p.FirstWord = 2, "weekend" }, "Hi.\n\nMonday plans.", true},
	{"keywords ok", "keywords", nil, func(c any) { c.(*KeywordsConfig).Include = []string{"Budget", "time line"} }, "The budget and time line.", false},
	{"keywords missing", "keywords", nil, func(c any) { c.(*KeywordsConfig).Include = []string{"budget"} }, "No money talk.", true},
	{"word freq", "keywords", nil, func(c any) { c.(*KeywordsConfig).Words = []WordCount{{Word: "risk", Count: Count{Min: 2}}} }, "Risk, risky, risk.", false},
	{"word freq few", "keywords", nil, func(c any) { c.(*KeywordsConfig).Words = []WordCount{{Word: "risk", Count: Count{Min: 2}}} }, "Risky risk.", true},
	{"letter freq", "keywords", nil, func(c any) { c.(*KeywordsConfig).Letters = []LetterCount{{Letter: "q", Count: Count{Max: 1}}} }, "Quick quiz", true},
	{"options ok", "options", nil, func(c any) { c.(*OptionsConfig).AnyOf = []string{"My answer is yes.", "My answer is no."} }, "Well. My answer is no.", false},
	{"options none", "options", nil, func(c any) { c.(*OptionsConfig).AnyOf = []string{"My answer is yes.", "My answer is no."} }, "Maybe.", true},
	{"two responses", "two_responses", nil, nil, "Joke one.\n******\nJoke two.", false},
	{"two responses same", "two_responses", nil, nil, "Joke.\n******\nJoke.", true},
	{"two responses one", "two_responses", nil, nil, "Joke one.", true},
	{"repeat ok", "repeat_prompt", nil, func(c any) { c.(*RepeatConfig).Text = "Write a poem." }, "write a poem. Roses are red.", false},
	{"repeat wrong", "repeat_prompt", nil, func(c any) { c.(*RepeatConfig).Text = "Write a poem." }, "Here is a poem.", true},
	{"code fenced", "code_only", nil, nil, "```go\nfunc main() {}\n```\n", false},
	{"code bare", "code_only", nil, nil, "def f(x):\n    return x\n", false},
	{"code prose first", "code_only", nil, nil, "Here is the function you asked for:\n```go\nfunc main() {}\n```", true},
	{"code prose after", "code_only", nil, nil, "```go\nfunc main() {}\n```\nThis prints nothing.", true},
	{"french ok", "language", nil, func(c any) { c.(*LanguageConfig).Language = "French" }, "Bonjour ! Je suis ravi de vous aider aujourd'hui. La capitale de la France est Paris, une ville magnifique connue pour ses musées, ses cafés et la tour Eiffel. N'hésitez pas à me poser d'autres questions.", false},
	{"french got english", "language", nil, func(c any) { c.(*LanguageConfig).Language = "fr" }, "Hello! I am happy to help you today. The capital of France is Paris, a beautiful city known for its museums, its cafes and the Eiffel Tower. Feel free to ask me more questions.", true},
	{"hindi got english", "language", nil, func(c any) { c.(*LanguageConfig).Language = "Hindi" }, "The answer is that the river flows to the sea, and the sea is wide and deep and blue in the summer.", true},
	{"hindi ok", "language", nil, func(c any) { c.(*LanguageConfig).Language = "hi" }, "नमस्ते! मैं आज आपकी मदद करके खुश हूँ। भारत की राजधानी नई दिल्ली है, जो एक सुंदर और ऐतिहासिक शहर है।", false},
	{"short text undecided", "language", nil, func(c any) { c.(*LanguageConfig).Language = "German" }, "OK.", false},
}

func run(t testing.TB, tc tcase, step int) validator.Validator {
	v := newCheck(t, tc)
	text := []byte(tc.text)
	for i := 0; i < len(text); i += step {
		v.Write(text[i:min(len(text), i+step)])
		if s := v.Settled(); s > min(len(text), i+step) {
			t.Fatalf("%s: settled %d past the text written %d", tc.name, s, i+step)
		}
	}
	v.Close()
	return v
}

func TestChecks(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := run(t, tc, len(tc.text)+1)
			if got := len(v.Findings()) > 0; got != tc.fail {
				t.Errorf("fail = %v, want %v (findings %+v)", got, tc.fail, v.Findings())
			}
			for _, f := range v.Findings() {
				if f.Reason != validator.ReasonInstructionDrift || f.Start < 0 || f.End < f.Start || f.End > len(tc.text) {
					t.Errorf("bad finding %+v", f)
				}
			}
			if !tc.fail && v.Settled() != len(tc.text) {
				t.Errorf("settled %d after close, want %d", v.Settled(), len(tc.text))
			}
		})
	}
}

// TestSplitIndependence: whole, byte by byte and random pieces give the
// same findings.
func TestSplitIndependence(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range cases {
		ref := run(t, tc, len(tc.text)+1).Findings()
		for _, step := range []int{1, 2, 3, 7} {
			got := run(t, tc, step).Findings()
			if len(got) != len(ref) || (len(got) > 0 && (got[0].Start != ref[0].Start || got[0].End != ref[0].End)) {
				t.Errorf("%s: step %d findings %+v, whole %+v", tc.name, step, got, ref)
			}
		}
		_ = r
	}
}

func FuzzChecks(f *testing.F) {
	for _, tc := range cases {
		f.Add(tc.text, uint8(3))
	}
	f.Fuzz(func(t *testing.T, text string, step uint8) {
		st := int(step%16) + 1
		for _, tc := range cases {
			tc.text = text
			whole := run(t, tc, len(text)+1).Findings()
			split := run(t, tc, st).Findings()
			if len(whole) != len(split) {
				t.Fatalf("%s: split %d gives %d findings, whole %d", tc.name, st, len(split), len(whole))
			}
		}
	})
}

func BenchmarkChecks(b *testing.B) {
	text := []byte("The quick brown fox jumps over the lazy dog, and then it rests in the shade of an old oak tree. ")
	for _, name := range []string{"no_commas", "letter_case", "quoted", "keywords", "language", "code_only"} {
		var tc tcase
		for _, c := range cases {
			if c.check == name {
				tc = c
				break
			}
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				v := newCheck(b, tc)
				for i := 0; i < len(text); i += 16 {
					v.Write(text[i:min(len(text), i+16)])
					v.Settled()
				}
				v.Close()
			}
		})
	}
}

// testRegistry holds the checks this package's tests look up.
var testRegistry = func() *validator.Registry {
	r := &validator.Registry{}
	Register(r)
	return r
}()
