package instruct

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Count is a bound on how often something occurs: at least Min, at most
// Max (0 = unbounded), or exactly Exactly when set.
type Count struct {
	Min     int `yaml:"min,omitempty"`
	Max     int `yaml:"max,omitempty"`
	Exactly int `yaml:"exactly,omitempty"`
}

// check returns "" when n satisfies the bound, else what is wrong.
func (c Count) check(n int, what string) string {
	switch {
	case c.Exactly > 0 && n != c.Exactly:
		return fmt.Sprintf("%d %s, want exactly %d", n, what, c.Exactly)
	case c.Min > 0 && n < c.Min:
		return fmt.Sprintf("%d %s, want at least %d", n, what, c.Min)
	case c.Max > 0 && n > c.Max:
		return fmt.Sprintf("%d %s, want at most %d", n, what, c.Max)
	}
	return ""
}

func (c Count) valid() error {
	if c.Min < 0 || c.Max < 0 || c.Exactly < 0 || (c.Max > 0 && c.Min > c.Max) {
		return fmt.Errorf("bad count %+v", c)
	}
	return nil
}

// CountConfig configures the counting checks (bullets, placeholders,
// highlights, capital_words, sections, paragraphs, sentences).
type CountConfig struct {
	Count `yaml:",inline"`
}

// Register adds the instruction checks to r.
func Register(r *validator.Registry) {
	reg := func(name, summary, doc, example string, cfg func() any, mk func(cfg any, req *validator.Request) (validator.Validator, error)) {
		r.Register(validator.Spec{Name: name, Summary: summary, Doc: doc, Reasons: drift, Example: example, Config: cfg, New: mk, AnswerOnly: true})
	}
	countCheck := func(name, summary, example string, count func([]byte) int, what string) {
		reg(name, summary, summary+" Judged on the whole output; reported at its end.", example,
			func() any { return &CountConfig{} },
			func(cfg any, _ *validator.Request) (validator.Validator, error) {
				c := cfg.(*CountConfig).Count
				if err := c.valid(); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				if c == (Count{}) {
					return nil, nil
				}
				return newEnd(name, func(t []byte) string { return c.check(count(t), what) }), nil
			})
	}
	countCheck("bullets", "Number of markdown bullet points (lines starting with * or -).",
		"{exactly: 3}\n", countBullets, "bullet points")
	countCheck("placeholders", "Number of [placeholder] fields in square brackets.",
		"{min: 2}\n", func(t []byte) int { return len(placeholderRE.FindAllIndex(t, -1)) }, "placeholders")
	countCheck("highlights", "Number of *highlighted* sections in markdown.",
		"{min: 3}\n", countHighlights, "highlighted sections")
	countCheck("capital_words", "Number of words written in all capital letters.",
		"{max: 4}\n", countCapitalWords, "all-capital words")
	countCheck("sentences", "Number of sentences (a lower bound the length check does not give).",
		"{min: 5}\n", CountSentences, "sentences")

	reg("sections", "Number of sections marked with a splitter such as \"SECTION 1\".",
		"Counts section headers \"<splitter> <number>\". Judged on the whole output.",
		"{splitter: SECTION, min: 4}\n",
		func() any { return &SectionsConfig{} },
		func(cfg any, _ *validator.Request) (validator.Validator, error) {
			c := cfg.(*SectionsConfig)
			if c.Splitter == "" || c.Count == (Count{}) {
				return nil, nil
			}
			re, err := regexp.Compile(`(?m)(?:^|\s)` + regexp.QuoteMeta(c.Splitter) + `\s?\d+`)
			if err != nil {
				return nil, fmt.Errorf("sections: %w", err)
			}
			return newEnd("sections", func(t []byte) string {
				return c.check(len(re.FindAllIndex(t, -1)), c.Splitter+" sections")
			}), nil
		})

	reg("paragraphs", "Number of paragraphs separated by a markdown divider (***) or blank lines, and the first word of the nth.",
		"With divider \"***\" paragraphs are split on *** lines; otherwise on blank lines. first_word with nth checks the nth paragraph's first word (case-insensitive).",
		"{exactly: 3, divider: \"***\"}\n",
		func() any { return &ParagraphsConfig{} },
		func(cfg any, _ *validator.Request) (validator.Validator, error) {
			c := *cfg.(*ParagraphsConfig)
			if c.Count == (Count{}) && c.FirstWord == "" {
				return nil, nil
			}
			return newEnd("paragraphs", c.judge), nil
		})

	reg("no_commas", "No commas anywhere in the output.", "Fails at the first comma as it streams.",
		"true\n", nil,
		func(any, *validator.Request) (validator.Validator, error) { return &noCommas{}, nil })

	reg("letter_case", "The whole output in lowercase (or in capital letters).",
		"Fails at the first letter of the wrong case as it streams. case: lower | upper.",
		"{case: lower}\n",
		func() any { return &CaseConfig{} },
		func(cfg any, _ *validator.Request) (validator.Validator, error) {
			c := cfg.(*CaseConfig)
			switch c.Case {
			case "":
				return nil, nil
			case "lower", "upper":
				return &letterCase{upper: c.Case == "upper"}, nil
			}
			return nil, fmt.Errorf("letter_case: case %q (want lower or upper)", c.Case)
		})

	reg("quoted", "The whole output wrapped in double quotation marks.",
		"Fails at once when the output does not open with a double quote; the closing quote is checked at the end.",
		"true\n", nil,
		func(any, *validator.Request) (validator.Validator, error) { return &quoted{}, nil })

	reg("end_phrase", "The output ends with an exact phrase (case-insensitive, ignoring trailing space and quotes).",
		"Judged at the end of the output.", "{phrase: \"Is there anything else I can help with?\"}\n",
		func() any { return &PhraseConfig{} },
		func(cfg any, _ *validator.Request) (validator.Validator, error) {
			p := strings.ToLower(strings.TrimSpace(cfg.(*PhraseConfig).Phrase))
			if p == "" {
				return nil, nil
			}
			return newEnd("end_phrase", func(t []byte) string {
				s := strings.ToLower(strings.Trim(strings.TrimSpace(string(t)), "\"“”"))
				if strings.HasSuffix(strings.TrimSpace(s), p) {
					return ""
				}
				return fmt.Sprintf("does not end with %q", p)
			}), nil
		})

	reg("title", "A title wrapped in double angular brackets, <<like this>>.", "Judged at the end of the output.",
		"true\n", nil,
		func(any, *validator.Request) (validator.Validator, error) {
			return newEnd("title", func(t []byte) string {
				if titleRE.Match(t) {
					return ""
				}
				return "no <<title>>"
			}), nil
		})

	reg("postscript", "A postscript starting with a marker such as P.S.", "Judged at the end of the output.",
		"{marker: P.S.}\n",
		func() any { return &PostscriptConfig{Marker: "P.S."} },
		func(cfg any, _ *validator.Request) (validator.Validator, error) {
			m := strings.TrimSpace(cfg.(*PostscriptConfig).Marker)
			if m == "" {
				return nil, nil
			}
			return newEnd("postscript", postscriptJudge(m)), nil
		})

	reg("keywords", "Required keywords, and bounds on how often words and letters occur.",
		"include: words or phrases that must appear (case-insensitive). words: per-word counts (whole words). letters: per-letter counts. Judged at the end.",
		"include: [budget, timeline]\nwords: [{word: risk, min: 2}]\nletters: [{letter: q, max: 3}]\n",
		func() any { return &KeywordsConfig{} },
		func(cfg any, _ *validator.Request) (validator.Validator, error) {
			c := cfg.(*KeywordsConfig)
			if len(c.Include) == 0 && len(c.Words) == 0 && len(c.Letters) == 0 {
				return nil, nil
			}
			return c.validator()
		})

	reg("options", "The output contains one of a fixed set of answers (\"My answer is yes.\").", "Judged at the end of the output.",
		"{any_of: [\"My answer is yes.\", \"My answer is no.\"]}\n",
		func() any { return &OptionsConfig{} },
		func(cfg any, _ *validator.Request) (validator.Validator, error) {
			opts := cfg.(*OptionsConfig).AnyOf
			if len(opts) == 0 {
				return nil, nil
			}
			return newEnd("options", func(t []byte) string {
				for _, o := range opts {
					if bytes.Contains(t, []byte(o)) {
						return ""
					}
				}
				return fmt.Sprintf("none of the options %q", opts)
			}), nil
		})

	reg("two_responses", "Exactly two different responses separated by ******.", "Judged at the end of the output.",
		"true\n", nil,
		func(any, *validator.Request) (validator.Validator, error) {
			return newEnd("two_responses", judgeTwoResponses), nil
		})

	reg("repeat_prompt", "The output starts by repeating a request word for word.",
		"Holds back the output until the repeated request is complete; fails at the first byte that differs (case-insensitive).",
		"{text: \"Write a haiku about rust.\"}\n",
		func() any { return &RepeatConfig{} },
		func(cfg any, _ *validator.Request) (validator.Validator, error) {
			t := strings.TrimSpace(cfg.(*RepeatConfig).Text)
			if t == "" {
				return nil, nil
			}
			return &repeatPrompt{want: []byte(strings.ToLower(t))}, nil
		})

	reg("code_only", "The output is code only: one fenced block or bare code, no prose around it.",
		"Prose before a fence, or text after the closing fence, fails at its first byte. Holds back only the start of a first line until it can tell prose from code.",
		"true\n", nil,
		func(any, *validator.Request) (validator.Validator, error) { return &codeOnly{}, nil })

	reg("has_code", "The output contains code: a fenced block or lines of code, not prose alone.",
		"Judged at the end of the output: an answer to a request for code that is all prose (filler) fails. A code fence, or a line with the punctuation or keywords of code, is code.",
		"true\n", nil,
		func(any, *validator.Request) (validator.Validator, error) {
			return newEnd("has_code", judgeHasCode), nil
		})

	reg("language", "The output is written in a given language, identified with whatlanggo (trigram profiles, 84 languages).",
		"Holds back the first LanguageWindow bytes (or the whole output if shorter), then identifies the language of that prefix; a different language fails at offset 0. Scripts are compared first; within one script a reliable trigram verdict is needed to fail. language: an English name (French) or an ISO 639-1/639-3 code (fr, fra).",
		"{language: French}\n",
		func() any { return &LanguageConfig{} },
		newLanguage)
}

// SectionsConfig configures sections.
type SectionsConfig struct {
	Splitter string `yaml:"splitter"`
	Count    `yaml:",inline"`
}

// ParagraphsConfig configures paragraphs.
type ParagraphsConfig struct {
	Count     `yaml:",inline"`
	Divider   string `yaml:"divider,omitempty"`
	Nth       int    `yaml:"nth,omitempty"`
	FirstWord string `yaml:"first_word,omitempty"`
}

var dividerRE = regexp.MustCompile(`\s?\*\*\*\s?`)

func (c ParagraphsConfig) judge(t []byte) string {
	var parts []string
	if c.Divider != "" {
		for _, p := range dividerRE.Split(string(t), -1) {
			if strings.TrimSpace(p) != "" {
				parts = append(parts, p)
			}
		}
	} else {
		parts = SplitParagraphs(string(t))
	}
	if msg := c.check(len(parts), "paragraphs"); msg != "" {
		return msg
	}
	if c.FirstWord != "" && c.Nth > 0 {
		if c.Nth > len(parts) {
			return fmt.Sprintf("no paragraph %d", c.Nth)
		}
		w := firstWord(parts[c.Nth-1])
		if !strings.EqualFold(w, c.FirstWord) {
			return fmt.Sprintf("paragraph %d starts with %q, want %q", c.Nth, w, c.FirstWord)
		}
	}
	return ""
}

// SplitParagraphs splits text on blank lines, dropping empty paragraphs.
func SplitParagraphs(s string) []string {
	var out []string
	for _, p := range blankLineRE.Split(s, -1) {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return out
}

var blankLineRE = regexp.MustCompile(`\n[ \t]*\n`)

func firstWord(p string) string {
	p = strings.TrimLeft(p, " \t\r\n\"'*#“")
	end := strings.IndexFunc(p, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' })
	if end < 0 {
		return p
	}
	return p[:end]
}

// CaseConfig configures letter_case.
type CaseConfig struct {
	Case string `yaml:"case"`
}

// PhraseConfig configures end_phrase.
type PhraseConfig struct {
	Phrase string `yaml:"phrase"`
}

// PostscriptConfig configures postscript.
type PostscriptConfig struct {
	Marker string `yaml:"marker"`
}

// OptionsConfig configures options.
type OptionsConfig struct {
	AnyOf []string `yaml:"any_of"`
}

// RepeatConfig configures repeat_prompt.
type RepeatConfig struct {
	Text string `yaml:"text"`
}

var (
	placeholderRE = regexp.MustCompile(`\[[^\[\]\n]+\]`)
	titleRE       = regexp.MustCompile(`<<[^\n<>]+>>`)
	highlightRE   = regexp.MustCompile(`\*\*[^\n*]+\*\*|\*[^\n*]+\*`)
	bulletRE      = regexp.MustCompile(`(?m)^[ \t]*(?:\*[^*\n]|-[ \t])`)
)

func countBullets(t []byte) int { return len(bulletRE.FindAllIndex(t, -1)) }

func countHighlights(t []byte) int {
	n := 0
	for _, m := range highlightRE.FindAll(t, -1) {
		if len(bytes.Trim(m, "* \t")) > 0 {
			n++
		}
	}
	return n
}

func countCapitalWords(t []byte) int {
	n := 0
	for _, w := range bytes.FieldsFunc(t, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' }) {
		hasUpper, hasLower := false, false
		for _, r := range string(w) {
			hasUpper = hasUpper || unicode.IsUpper(r)
			hasLower = hasLower || unicode.IsLower(r)
		}
		if hasUpper && !hasLower {
			n++
		}
	}
	return n
}

// CountSentences counts sentence ends: runs of . ! ? (and their CJK forms)
// followed by space or the end, outside of common abbreviations and
// decimal numbers. A trailing unterminated sentence counts too.
func CountSentences(t []byte) int {
	s := string(t)
	n := 0
	pending := false
	for i, r := range s {
		switch r {
		case '.', '!', '?', '。', '！', '？':
			if !pending {
				continue
			}
			next := i + utf8.RuneLen(r)
			if next < len(s) {
				c := s[next]
				if c != ' ' && c != '\n' && c != '\t' && c != '"' && c != ')' && c != '\'' && r == '.' {
					continue
				}
				if r == '.' && isAbbrev(s[:i]) {
					continue
				}
			}
			n++
			pending = false
		default:
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				pending = true
			}
		}
	}
	if pending {
		n++
	}
	return n
}

func isAbbrev(before string) bool {
	j := len(before)
	for j > 0 && before[j-1] != ' ' && before[j-1] != '\n' {
		j--
	}
	switch strings.ToLower(before[j:]) {
	case "mr", "mrs", "ms", "dr", "prof", "e.g", "i.e", "etc", "vs", "st", "jr", "sr", "p.s", "no", "fig":
		return true
	}
	return false
}

func postscriptJudge(marker string) func([]byte) string {
	pat := strings.ToLower(marker)
	pat = strings.ReplaceAll(regexp.QuoteMeta(pat), `\.`, `\.\s?`)
	re := regexp.MustCompile(`(?im)(?:^|\s)` + pat)
	return func(t []byte) string {
		if re.Match(bytes.ToLower(t)) {
			return ""
		}
		return fmt.Sprintf("no postscript starting with %s", marker)
	}
}

func judgeTwoResponses(t []byte) string {
	parts := strings.Split(string(t), "******")
	var rs []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			rs = append(rs, p)
		}
	}
	if len(parts) != 2 || len(rs) != 2 {
		return fmt.Sprintf("%d responses separated by ******, want 2", len(rs))
	}
	if rs[0] == rs[1] {
		return "the two responses are the same"
	}
	return ""
}

// noCommas fails at the first comma, ASCII or full-width (U+FF0C, which
// may arrive split across writes: the state carries its first bytes).
type noCommas struct {
	n        int
	state    int // bytes of EF BC 8C matched
	findings []validator.Finding
}

var fullWidthComma = [3]byte{0xEF, 0xBC, 0x8C}

func (c *noCommas) Name() string { return "no_commas" }
func (c *noCommas) Write(p []byte) (int, error) {
	if len(c.findings) > 0 {
		c.n += len(p)
		return len(p), nil
	}
	for i, b := range p {
		at := c.n + i
		if b == ',' {
			c.findings = append(c.findings, fail("no_commas", at, at+1, "comma"))
			break
		}
		switch {
		case b == fullWidthComma[c.state]:
			c.state++
			if c.state == 3 {
				c.findings = append(c.findings, fail("no_commas", at-2, at+1, "full-width comma"))
			}
		case b == fullWidthComma[0]:
			c.state = 1
		default:
			c.state = 0
		}
		if len(c.findings) > 0 {
			break
		}
	}
	c.n += len(p)
	return len(p), nil
}
func (c *noCommas) Settled() int {
	if len(c.findings) > 0 {
		return c.findings[0].Start
	}
	return c.n - c.state
}
func (c *noCommas) Findings() []validator.Finding { return c.findings }
func (c *noCommas) Close()                        { c.state = 0 }

// letterCase fails at the first letter of the wrong case.
type letterCase struct {
	upper    bool
	n        int
	carry    [utf8.UTFMax]byte
	nc       int
	findings []validator.Finding
	closed   bool
}

func (c *letterCase) Name() string { return "letter_case" }
func (c *letterCase) Write(p []byte) (int, error) {
	if len(c.findings) > 0 {
		c.n += len(p)
		return len(p), nil
	}
	off := c.n - c.nc // offset of the carried bytes
	buf := p
	if c.nc > 0 {
		buf = append(c.carry[:c.nc:c.nc], p...)
	}
	c.nc = 0
	for i := 0; i < len(buf); {
		b := buf[i]
		if b < utf8.RuneSelf {
			if (c.upper && b >= 'a' && b <= 'z') || (!c.upper && b >= 'A' && b <= 'Z') {
				c.report(off + i)
				break
			}
			i++
			continue
		}
		if !utf8.FullRune(buf[i:]) {
			c.nc = copy(c.carry[:], buf[i:])
			break
		}
		r, size := utf8.DecodeRune(buf[i:])
		if (c.upper && unicode.IsLower(r)) || (!c.upper && unicode.IsUpper(r)) {
			c.report(off + i)
			break
		}
		i += size
	}
	c.n += len(p)
	return len(p), nil
}
func (c *letterCase) report(at int) {
	want := "lowercase"
	if c.upper {
		want = "capital letters"
	}
	c.findings = append(c.findings, fail("letter_case", at, at+1, "letter not in "+want))
}
func (c *letterCase) Settled() int {
	if len(c.findings) > 0 {
		return c.findings[0].Start
	}
	return c.n - c.nc
}
func (c *letterCase) Findings() []validator.Finding { return c.findings }
func (c *letterCase) Close()                        { c.closed = true; c.nc = 0 }

// quoted checks the opening quote as it streams and the closing one at the
// end.
type quoted struct {
	n        int
	opened   bool
	last     byte // last non-space byte
	lastAt   int
	findings []validator.Finding
}

func (q *quoted) Name() string { return "quoted" }
func (q *quoted) Write(p []byte) (int, error) {
	for i, b := range p {
		if b == ' ' || b == '\n' || b == '\t' || b == '\r' {
			continue
		}
		if !q.opened && len(q.findings) == 0 {
			q.opened = true
			if b != '"' && b != 0xE2 { // 0xE2 starts “
				q.findings = append(q.findings, fail("quoted", q.n+i, q.n+i+1, "does not open with a double quote"))
			}
		}
		q.last, q.lastAt = b, q.n+i
	}
	q.n += len(p)
	return len(p), nil
}
func (q *quoted) Settled() int {
	if len(q.findings) > 0 {
		return q.findings[0].Start
	}
	return q.n
}
func (q *quoted) Findings() []validator.Finding { return q.findings }
func (q *quoted) Close() {
	if len(q.findings) > 0 {
		return
	}
	if !q.opened {
		q.findings = append(q.findings, fail("quoted", q.n, q.n, "empty output, want a quoted response"))
		return
	}
	if q.last != '"' && q.last != 0x9D { // 0x9D ends ”
		q.findings = append(q.findings, fail("quoted", q.n, q.n, "does not close with a double quote"))
	}
}

// repeatPrompt holds everything back until the output has repeated want.
type repeatPrompt struct {
	want     []byte // lower-case
	got      int    // bytes of want matched
	n        int
	lead     bool // still skipping leading space
	findings []validator.Finding
	done     bool
}

func (r *repeatPrompt) Name() string { return "repeat_prompt" }
func (r *repeatPrompt) Write(p []byte) (int, error) {
	for _, b := range p {
		r.n++
		if r.done || len(r.findings) > 0 {
			continue
		}
		if r.got == 0 && (b == ' ' || b == '\n' || b == '\t' || b == '"') {
			continue
		}
		if b >= 'A' && b <= 'Z' {
			b += 'a' - 'A'
		}
		if b != r.want[r.got] {
			r.findings = append(r.findings, fail("repeat_prompt", 0, r.n, "does not start by repeating the request word for word"))
			continue
		}
		r.got++
		if r.got == len(r.want) {
			r.done = true
		}
	}
	return len(p), nil
}
func (r *repeatPrompt) Settled() int {
	if r.done {
		return r.n
	}
	return 0
}
func (r *repeatPrompt) Findings() []validator.Finding { return r.findings }
func (r *repeatPrompt) Close() {
	if !r.done && len(r.findings) == 0 {
		r.findings = append(r.findings, fail("repeat_prompt", 0, r.n, "output ended before repeating the request"))
	}
}
