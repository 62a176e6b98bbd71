package instruct

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/abadojack/whatlanggo"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// KeywordsConfig configures keywords.
type KeywordsConfig struct {
	Include []string      `yaml:"include,omitempty"`
	Words   []WordCount   `yaml:"words,omitempty"`
	Letters []LetterCount `yaml:"letters,omitempty"`
}

// WordCount bounds how often a whole word (or phrase) occurs.
type WordCount struct {
	Word  string `yaml:"word"`
	Count `yaml:",inline"`
}

// LetterCount bounds how often a letter occurs (case-insensitive).
type LetterCount struct {
	Letter string `yaml:"letter"`
	Count  `yaml:",inline"`
}

func (c *KeywordsConfig) validator() (validator.Validator, error) {
	type wre struct {
		re *regexp.Regexp
		WordCount
	}
	var words []wre
	for _, w := range c.Words {
		if strings.TrimSpace(w.Word) == "" {
			return nil, fmt.Errorf("keywords: empty word")
		}
		if err := w.valid(); err != nil {
			return nil, fmt.Errorf("keywords: %s: %w", w.Word, err)
		}
		re, err := regexp.Compile(`(?i)\b` + regexp.QuoteMeta(strings.TrimSpace(w.Word)) + `\b`)
		if err != nil {
			return nil, fmt.Errorf("keywords: %w", err)
		}
		words = append(words, wre{re, w})
	}
	for _, l := range c.Letters {
		if len([]rune(l.Letter)) != 1 {
			return nil, fmt.Errorf("keywords: letter %q is not one letter", l.Letter)
		}
	}
	include := make([][]byte, len(c.Include))
	for i, k := range c.Include {
		include[i] = bytes.ToLower([]byte(strings.TrimSpace(k)))
	}
	letters := c.Letters
	return newEnd("keywords", func(t []byte) string {
		lower := bytes.ToLower(t)
		for i, k := range include {
			if len(k) > 0 && !bytes.Contains(lower, k) {
				return fmt.Sprintf("keyword %q missing", c.Include[i])
			}
		}
		for _, w := range words {
			if msg := w.check(len(w.re.FindAllIndex(t, -1)), fmt.Sprintf("uses of %q", w.Word)); msg != "" {
				return msg
			}
		}
		for _, l := range letters {
			n := bytes.Count(lower, []byte(strings.ToLower(l.Letter)))
			if msg := l.check(n, fmt.Sprintf("letters %q", l.Letter)); msg != "" {
				return msg
			}
		}
		return ""
	}), nil
}

// codeOnly: the output is one fenced code block (optionally surrounded by
// blank space) or bare code without a fence. It decides on the first
// line: a fence opens code mode; otherwise a line that reads like prose
// fails at 0. After a closing fence only whitespace may follow.
type codeOnly struct {
	text     []byte
	n        int
	state    int // 0 before the first line is judged, 1 in fence, 2 after fence, 3 bare code
	lineAt   int // start of the current line
	findings []validator.Finding
}

func (c *codeOnly) Name() string { return "code_only" }
func (c *codeOnly) Write(p []byte) (int, error) {
	c.text = append(c.text, p...)
	c.n += len(p)
	if len(c.findings) == 0 {
		c.scan(false)
	}
	return len(p), nil
}

func (c *codeOnly) scan(final bool) {
	for len(c.findings) == 0 {
		nl := bytes.IndexByte(c.text[c.lineAt:], '\n')
		end := c.lineAt + nl
		if nl < 0 {
			if !final {
				return
			}
			end = len(c.text)
			if end == c.lineAt {
				return
			}
		}
		line := c.text[c.lineAt:end]
		trim := bytes.TrimSpace(line)
		switch c.state {
		case 0:
			if len(trim) == 0 {
				break
			}
			if bytes.HasPrefix(trim, []byte("```")) || bytes.HasPrefix(trim, []byte("~~~")) {
				c.state = 1
			} else if looksLikeProse(trim) {
				c.findings = append(c.findings, fail("code_only", c.lineAt, end, "prose where only code was asked for"))
				return
			} else {
				c.state = 3
			}
		case 1:
			if bytes.HasPrefix(trim, []byte("```")) || bytes.HasPrefix(trim, []byte("~~~")) {
				c.state = 2
			}
		case 2:
			if len(trim) > 0 {
				c.findings = append(c.findings, fail("code_only", c.lineAt, end, "text after the code block"))
				return
			}
		case 3:
			if bytes.HasPrefix(trim, []byte("```")) {
				c.findings = append(c.findings, fail("code_only", c.lineAt, end, "a code fence after text"))
				return
			}
		}
		if nl < 0 {
			c.lineAt = len(c.text)
			return
		}
		c.lineAt = end + 1
	}
}

// looksLikeProse tells a sentence from a line of code: prose has several
// words, mostly letters, and ends like a sentence or a lead-in (".", ":",
// "!"), with none of the punctuation code is made of.
func looksLikeProse(line []byte) bool {
	s := string(line)
	if strings.ContainsAny(s, "{}();=<>[]#$") && !strings.HasSuffix(s, ":") {
		return false
	}
	words := strings.Fields(s)
	if len(words) < 4 {
		return false
	}
	letters := 0
	for _, r := range s {
		if unicode.IsLetter(r) || r == ' ' {
			letters++
		}
	}
	if letters*10 < len([]rune(s))*8 {
		return false
	}
	last := s[len(s)-1]
	return last == '.' || last == ':' || last == '!' || last == '?' || unicode.IsUpper([]rune(words[0])[0])
}

func (c *codeOnly) Settled() int {
	if len(c.findings) > 0 {
		return c.findings[0].Start
	}
	if c.state == 2 {
		return c.lineAt // text after the fence may still fail
	}
	return c.lineAt
}
func (c *codeOnly) Findings() []validator.Finding { return c.findings }
func (c *codeOnly) Close() {
	if len(c.findings) == 0 {
		c.scan(true)
	}
	c.lineAt = len(c.text)
}

// LanguageWindow is how many bytes the language check reads (and holds
// back) before it decides.
const LanguageWindow = 200

// LanguageConfig configures language.
type LanguageConfig struct {
	Language string `yaml:"language"`
}

// ParseLanguage resolves an English language name or an ISO 639-1/-3
// code to a whatlanggo language.
func ParseLanguage(s string) (whatlanggo.Lang, bool) {
	l, ok := languageTable()[strings.ToLower(strings.TrimSpace(s))]
	return l, ok
}

// languageTable maps lower-case names and codes to languages. It is built
// once: whatlanggo's code lookups build a map on every call.
var languageTable = sync.OnceValue(func() map[string]whatlanggo.Lang {
	t := map[string]whatlanggo.Lang{}
	for l, name := range whatlanggo.Langs {
		t[strings.ToLower(name)] = l
		if c := l.Iso6391(); c != "" {
			t[c] = l
		}
		if c := l.Iso6393(); c != "" {
			t[c] = l
		}
	}
	// names whatlanggo spells differently
	for name, l := range map[string]whatlanggo.Lang{
		"farsi": whatlanggo.Pes, "persian": whatlanggo.Pes, "fa": whatlanggo.Pes,
		"arabic": whatlanggo.Arb, "ar": whatlanggo.Arb, "punjabi": whatlanggo.Pan, "pa": whatlanggo.Pan,
		"nepali": whatlanggo.Nep, "ne": whatlanggo.Nep, "chinese": whatlanggo.Cmn, "mandarin": whatlanggo.Cmn, "zh": whatlanggo.Cmn,
	} {
		t[name] = l
	}
	return t
})

func newLanguage(cfg any, _ *validator.Request) (validator.Validator, error) {
	name := cfg.(*LanguageConfig).Language
	if name == "" {
		return nil, nil
	}
	l, ok := ParseLanguage(name)
	if !ok {
		return nil, fmt.Errorf("language: unknown language %q", name)
	}
	return &language{want: l}, nil
}

type language struct {
	want     whatlanggo.Lang
	text     []byte
	n        int
	decided  bool
	findings []validator.Finding
}

func (l *language) Name() string { return "language" }
func (l *language) Write(p []byte) (int, error) {
	l.n += len(p)
	if !l.decided {
		l.text = append(l.text, p...)
		if len(l.text) >= LanguageWindow {
			l.decide()
		}
	}
	return len(p), nil
}

// decide identifies the language of the window. Code blocks and URLs are
// left out: they are no language.
func (l *language) decide() {
	l.decided = true
	window := l.text
	if len(window) > LanguageWindow {
		// judge the window only: a whole answer written at once would
		// otherwise cost trigram scoring over all of it.
		cut := LanguageWindow
		for cut > 0 && !utf8.RuneStart(window[cut]) {
			cut--
		}
		window = window[:cut]
	}
	text := stripCode(string(window))
	if letterCount(text) < 12 {
		return // too little text to judge
	}
	// The script decides most cases at a fraction of the cost of trigram
	// scoring: Hindi wanted, Latin letters written.
	script := whatlanggo.DetectScript(text)
	if want := scriptOf(l.want); script != nil && want != nil && script != want {
		if !(want == unicode.Hiragana && (script == unicode.Katakana || script == unicode.Han)) {
			l.fail(whatlanggo.Info{Lang: -1, Script: script})
			return
		}
	}
	if script != unicode.Latin && script != unicode.Cyrillic && script != unicode.Devanagari && script != unicode.Arabic {
		return // a script of one language in the table: the script matched
	}
	info := whatlanggo.DetectWithOptions(text, whatlanggo.Options{Whitelist: candidates(l.want)})
	if info.Lang == l.want || sameFamily(info.Lang, l.want) {
		return
	}
	if info.Confidence >= 0.5 {
		l.fail(info)
	}
}

func (l *language) fail(info whatlanggo.Info) {
	got := info.Lang.String()
	if info.Lang < 0 {
		got = "another script"
	}
	l.findings = append(l.findings, fail("language", 0, len(l.text), fmt.Sprintf("written in %s, want %s", got, l.want.String())))
}

func (l *language) Settled() int {
	if len(l.findings) > 0 {
		return 0
	}
	if l.decided {
		return l.n
	}
	return 0
}
func (l *language) Findings() []validator.Finding { return l.findings }
func (l *language) Close() {
	if !l.decided {
		l.decide()
	}
	l.text = nil
}

var (
	fenceRE = regexp.MustCompile("(?s)```.*?(```|$)")
	urlRE   = regexp.MustCompile(`https?://\S+`)
)

func stripCode(s string) string {
	s = fenceRE.ReplaceAllString(s, " ")
	return urlRE.ReplaceAllString(s, " ")
}

func letterCount(s string) int {
	n := 0
	for _, r := range s {
		if unicode.IsLetter(r) {
			n++
		}
	}
	return n
}

// commonLangs are the languages an answer plausibly drifts into: the
// check asks "is it the wanted language or one of these?", which costs a
// fraction of scoring all 84 profiles and is what drift looks like.
// Languages of other scripts are told apart by script alone (decide
// checks the script first), so only Latin and Cyrillic ones are here.
var commonLangs = []whatlanggo.Lang{
	whatlanggo.Eng, whatlanggo.Spa, whatlanggo.Fra, whatlanggo.Deu, whatlanggo.Ita, whatlanggo.Por,
	whatlanggo.Nld, whatlanggo.Rus,
}

var candidateSets sync.Map // whatlanggo.Lang -> map[whatlanggo.Lang]bool

func candidates(want whatlanggo.Lang) map[whatlanggo.Lang]bool {
	if m, ok := candidateSets.Load(want); ok {
		return m.(map[whatlanggo.Lang]bool)
	}
	m := map[whatlanggo.Lang]bool{want: true}
	for _, l := range commonLangs {
		m[l] = true
	}
	if ws := scriptOf(want); ws != unicode.Latin {
		for l, sc := range langScripts {
			if sc == ws {
				m[l] = true
			}
		}
	}
	for _, p := range familyPairs {
		if p[0] == want {
			m[p[1]] = true
		}
		if p[1] == want {
			m[p[0]] = true
		}
	}
	v, _ := candidateSets.LoadOrStore(want, m)
	return v.(map[whatlanggo.Lang]bool)
}

// sameFamily treats mutually intelligible pairs the trigram profiles
// confuse on short text as one language.
var familyPairs = [][2]whatlanggo.Lang{
	{whatlanggo.Hin, whatlanggo.Mar}, {whatlanggo.Hin, whatlanggo.Nep}, {whatlanggo.Mar, whatlanggo.Nep},
	{whatlanggo.Nob, whatlanggo.Dan}, {whatlanggo.Srp, whatlanggo.Hrv},
	{whatlanggo.Ukr, whatlanggo.Rus}, {whatlanggo.Bul, whatlanggo.Mkd},
}

func sameFamily(a, b whatlanggo.Lang) bool {
	for _, p := range familyPairs {
		if (p[0] == a && p[1] == b) || (p[0] == b && p[1] == a) {
			return true
		}
	}
	return false
}

// scriptOf returns the script a language is written in, by detecting the
// script of its own name in a sample; nil when unknown.
func scriptOf(l whatlanggo.Lang) *unicode.RangeTable {
	if s, ok := langScripts[l]; ok {
		return s
	}
	return unicode.Latin
}

var langScripts = map[whatlanggo.Lang]*unicode.RangeTable{
	whatlanggo.Hin: unicode.Devanagari, whatlanggo.Mar: unicode.Devanagari, whatlanggo.Nep: unicode.Devanagari,
	whatlanggo.Rus: unicode.Cyrillic, whatlanggo.Ukr: unicode.Cyrillic, whatlanggo.Bul: unicode.Cyrillic,
	whatlanggo.Bel: unicode.Cyrillic, whatlanggo.Srp: unicode.Cyrillic, whatlanggo.Mkd: unicode.Cyrillic,
	whatlanggo.Arb: unicode.Arabic, whatlanggo.Pes: unicode.Arabic, whatlanggo.Urd: unicode.Arabic,
	whatlanggo.Heb: unicode.Hebrew, whatlanggo.Ydd: unicode.Hebrew,
	whatlanggo.Ben: unicode.Bengali, whatlanggo.Guj: unicode.Gujarati, whatlanggo.Pan: unicode.Gurmukhi,
	whatlanggo.Kan: unicode.Kannada, whatlanggo.Tam: unicode.Tamil, whatlanggo.Tel: unicode.Telugu,
	whatlanggo.Mal: unicode.Malayalam, whatlanggo.Tha: unicode.Thai, whatlanggo.Kor: unicode.Hangul,
	whatlanggo.Jpn: unicode.Hiragana, whatlanggo.Cmn: unicode.Han, whatlanggo.Ell: unicode.Greek,
	whatlanggo.Kat: unicode.Georgian, whatlanggo.Amh: unicode.Ethiopic,
	whatlanggo.Khm: unicode.Khmer, whatlanggo.Mya: unicode.Myanmar, whatlanggo.Sin: unicode.Sinhala,
	whatlanggo.Ori: unicode.Oriya,
}
