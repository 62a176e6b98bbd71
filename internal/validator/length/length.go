// Package length limits the size of an output: words, sentences,
// characters, approximate tokens, lines and paragraphs, with maxima that
// fail as soon as they are crossed and minima checked at the end.
//
// Everything is counted incrementally, one rune at a time (a rune cut by
// a chunk boundary is completed from the next chunk), so the counts do
// not depend on how the stream is split.
//
// # What counts
//
//   - A character is a Unicode code point (rune).
//   - A word is a run of non-space runes that contains a letter or a digit:
//     "don't", "state-of-the-art" and "3.14" are one word each, a lone
//     "—" or "*" is none.
//   - A sentence begins with the first word of the text, and with the first
//     word after a sentence end: '.', '!', '?' or '…' followed by white
//     space, a CJK full stop ('。', '！', '？'), or a blank line. A period
//     after a common abbreviation ("e.g.", "Dr.", "etc."), after a single
//     letter (an initial) or after a number that opens a line (a list
//     marker, "1.") does not end a sentence.
//   - A line begins at the start of the text and after every newline that
//     is followed by anything.
//   - A paragraph begins with the first non-space rune of the text and
//     after every blank line.
//   - Tokens are approximated without a tokenizer as the mean of two
//     common rules of thumb, UTF-8 bytes / 4 and words × 4/3:
//     tokens ≈ (3·bytes + 16·words) / 24, rounded up. For English prose
//     this lands within about 15% of BPE tokenizers; counting bytes rather
//     than runes keeps CJK text (about one token per character) from
//     being undercounted.
//
// # Findings and what it holds back
//
// A maximum fails at the rune that crosses it: Start is that rune (the
// first letter of the word one too many, the start of the line one too
// many, the character or token that goes over) and End the end of that
// rune. Text before the crossing point is fine and released; Settled is
// everything written (less a rune cut in half) until a limit is crossed,
// and then stays at the crossing point. Minima are checked at Close and
// reported as an empty range at the end of the output. Each limit reports
// at most once.
package length

import (
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Name is the registry name of the check.
const Name = "length"

// Config is the policy section of the check (also built from prompt
// constraints such as "in under 50 words"). Zero turns a limit off.
type Config struct {
	MaxWords      int `yaml:"max_words" json:"max_words"`
	MinWords      int `yaml:"min_words" json:"min_words"`
	MaxSentences  int `yaml:"max_sentences" json:"max_sentences"`
	MaxChars      int `yaml:"max_chars" json:"max_chars"`
	MaxTokens     int `yaml:"max_tokens" json:"max_tokens"`
	MaxLines      int `yaml:"max_lines" json:"max_lines"`
	MaxParagraphs int `yaml:"max_paragraphs" json:"max_paragraphs"`
}

// DefaultConfig returns a configuration with every limit off.
func DefaultConfig() *Config { return &Config{} }

func (c *Config) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"max_words", c.MaxWords}, {"min_words", c.MinWords}, {"max_sentences", c.MaxSentences}, {"max_chars", c.MaxChars},
		{"max_tokens", c.MaxTokens}, {"max_lines", c.MaxLines}, {"max_paragraphs", c.MaxParagraphs}} {
		if f.v < 0 {
			return fmt.Errorf("length: %s is %d, want 0 (off) or more", f.name, f.v)
		}
	}
	if c.MaxWords > 0 && c.MinWords > c.MaxWords {
		return fmt.Errorf("length: min_words %d is above max_words %d", c.MinWords, c.MaxWords)
	}
	return nil
}

// enabled reports whether any limit is set.
func (c *Config) enabled() bool { return *c != Config{} }

// Register adds the check to r.
func Register(r *validator.Registry) {
	r.Register(validator.Spec{
		AnswerOnly: true,
		Name:       Name,
		Summary:    "limits words, sentences, characters, approximate tokens, lines and paragraphs",
		Doc: `Counts incrementally and fails at the rune that crosses a maximum (the first
letter of the word one too many, the start of the extra line, ...). Minimum
words are checked at the end. Tokens are approximated as
(3*bytes + 16*words)/24, the mean of bytes/4 and words*4/3. 0 turns a limit off;
a check with every limit off does not run.`,
		Reasons: []validator.Reason{validator.ReasonLengthExceeded},
		Example: "max_words: 50\nmin_words: 5\nmax_sentences: 3\nmax_chars: 400\nmax_tokens: 120\nmax_lines: 10\nmax_paragraphs: 2\n",
		Config:  func() any { return DefaultConfig() },
		New: func(cfg any, _ *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*Config)
			if c == nil {
				c = DefaultConfig()
			}
			if err := c.validate(); err != nil {
				return nil, err
			}
			if !c.enabled() {
				return nil, nil
			}
			return New(*c), nil
		},
	})
}

// Counter is the length validator. Create it with New.
type Counter struct {
	cfg Config

	carry  [utf8.UTFMax]byte
	ncarry int
	off    int // bytes read, carried ones included

	runes, words, sentences, lines, paragraphs int

	inToken      bool // inside a run of non-space runes
	tokenIsWord  bool // that run holds a letter or digit
	sentenceOpen bool // a sentence has begun and not ended
	pendingEnd   bool // saw a terminator; ends the sentence if white space follows
	lineStart    bool // the next rune starts a line
	newlines     int  // newlines since the last non-space rune (2 = blank line)
	firstOnLine  bool // the current word is the first on its line
	word         [8]byte
	wordLen      int // bytes of the current word kept in word (lowercased ASCII, capped)
	wordDigits   bool
	wordLetters  int

	limit    [numLimits]int // effective maxima; "off" is math.MaxInt (tokens: ×24)
	hit      [numLimits]bool
	findings []validator.Finding
	closed   bool
}

const (
	limWords = iota
	limSentences
	limChars
	limTokens
	limLines
	limParagraphs
	numLimits
)

var limitNames = [numLimits]string{"words", "sentences", "characters", "tokens (approx.)", "lines", "paragraphs"}

var _ validator.Validator = (*Counter)(nil)

// New returns a counter for the given limits.
func New(cfg Config) *Counter {
	c := &Counter{cfg: cfg, lineStart: true}
	for i, v := range [numLimits]int{cfg.MaxWords, cfg.MaxSentences, cfg.MaxChars, cfg.MaxTokens, cfg.MaxLines, cfg.MaxParagraphs} {
		c.limit[i] = math.MaxInt
		if v > 0 {
			c.limit[i] = v
		}
	}
	if cfg.MaxTokens > 0 {
		c.limit[limTokens] = 24 * cfg.MaxTokens
	}
	return c
}

// Name returns "length".
func (c *Counter) Name() string { return Name }

// Findings returns the limits crossed so far.
func (c *Counter) Findings() []validator.Finding { return c.findings }

// Settled is everything written until a maximum is crossed, then the
// crossing point.
func (c *Counter) Settled() int {
	if len(c.findings) > 0 {
		return c.findings[0].Start
	}
	return c.off - c.ncarry
}

// Write counts the next piece of output.
func (c *Counter) Write(p []byte) (int, error) {
	n := len(p)
	for c.ncarry > 0 && len(p) > 0 {
		c.carry[c.ncarry] = p[0]
		c.ncarry++
		c.off++
		p = p[1:]
		if utf8.FullRune(c.carry[:c.ncarry]) {
			r, size := utf8.DecodeRune(c.carry[:c.ncarry])
			at := c.off - c.ncarry
			c.rune(r, at, size)
			// Bytes after an invalid first byte are read again.
			rest := c.ncarry - size
			c.ncarry = 0
			c.off -= rest
			if rest > 0 {
				back := make([]byte, 0, rest+len(p))
				back = append(back, c.carry[size:size+rest]...)
				p = append(back, p...)
			}
		}
	}
	for i := 0; i < len(p); {
		b := p[i]
		if b < utf8.RuneSelf {
			if c.tokenIsWord && c.inToken && asciiClass[b] == 2 && !c.pendingEnd {
				// Fast path: one more ASCII letter or digit inside a word.
				c.runes++
				c.wordLetters++
				if b > '9' {
					c.wordDigits = false
				}
				if c.wordLen < len(c.word) {
					c.word[c.wordLen] = b | 0x20
					c.wordLen++
				}
				c.off++
				i++
				if c.runes > c.limit[limChars] || 3*c.off+16*c.words > c.limit[limTokens] {
					c.sizeChecks(c.off-1, c.off)
				}
				continue
			}
			c.rune(rune(b), c.off, 1)
			c.off++
			i++
			continue
		}
		if !utf8.FullRune(p[i:]) {
			c.ncarry = copy(c.carry[:], p[i:])
			c.off += c.ncarry
			break
		}
		r, size := utf8.DecodeRune(p[i:])
		c.rune(r, c.off, size)
		c.off += size
		i += size
	}
	return n, nil
}

// Close counts a trailing cut rune and checks the minima.
func (c *Counter) Close() {
	if c.closed {
		return
	}
	c.closed = true
	if c.ncarry > 0 {
		c.rune(utf8.RuneError, c.off-c.ncarry, c.ncarry)
		c.ncarry = 0
	}
	if c.cfg.MinWords > 0 && c.words < c.cfg.MinWords {
		c.findings = append(c.findings, validator.Finding{
			Check: Name, Reason: validator.ReasonLengthExceeded, Start: c.off, End: c.off,
			Message: fmt.Sprintf("too short: %d words, at least %d wanted", c.words, c.cfg.MinWords),
		})
	}
}

// Counts returns the counts so far: words, sentences, runes, approximate
// tokens, lines and paragraphs.
func (c *Counter) Counts() (words, sentences, chars, tokens, lines, paragraphs int) {
	return c.words, c.sentences, c.runes, c.tokens(), c.lines, c.paragraphs
}

func (c *Counter) tokens() int {
	return (3*c.off + 16*c.words + 23) / 24
}

// asciiClass classifies ASCII bytes: 1 space, 2 letter or digit.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for _, b := range " \n\t\r\f\v" {
		t[b] = 1
	}
	for b := '0'; b <= 'z'; b++ {
		if b <= '9' || b >= 'a' || b >= 'A' && b <= 'Z' {
			t[b] = 2
		}
	}
	return t
}()

func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r] == 1
	}
	return unicode.IsSpace(r)
}

func isAlnum(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r] == 2
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// abbreviations whose period does not end a sentence (lowercase, no dots).
var abbreviations = map[string]bool{
	"eg": true, "ie": true, "etc": true, "vs": true, "mr": true, "mrs": true, "ms": true, "dr": true,
	"prof": true, "st": true, "jr": true, "sr": true, "inc": true, "ltd": true, "co": true, "fig": true,
	"approx": true, "no": true, "vol": true, "cf": true, "al": true, "e": true, "i": true,
}

// rune counts one rune at byte offset at, size bytes long. Offsets of
// tokens and lines are those of their first rune, so each count crosses
// its limit at a rune and the finding is located there.
func (c *Counter) rune(r rune, at, size int) {
	c.runes++
	end := at + size
	if isSpace(r) {
		if c.inToken {
			c.inToken = false
			if c.pendingEnd {
				c.sentenceOpen = false
			}
			c.pendingEnd = false
		}
		if r == '\n' {
			c.newlines++
			if c.newlines >= 2 {
				c.sentenceOpen = false // a blank line ends a sentence
			}
		}
		if c.lineStart {
			c.newLine(at, end)
		}
		c.lineStart = r == '\n'
		c.sizeChecks(at, end)
		return
	}
	if c.lineStart {
		c.newLine(at, end)
		c.lineStart = false
	}
	if c.paragraphs == 0 || c.newlines >= 2 {
		c.paragraphs++
		if c.paragraphs > c.limit[limParagraphs] {
			c.over(limParagraphs, at, end)
		}
	}
	firstOnLine := c.newlines > 0 || c.lines == 1 && !c.inToken && c.words == 0
	c.newlines = 0
	if !c.inToken {
		c.inToken, c.tokenIsWord = true, false
		c.wordLen, c.wordDigits, c.wordLetters = 0, true, 0
		c.firstOnLine = firstOnLine
		if c.pendingEnd {
			c.pendingEnd = false
		}
	}
	switch {
	case isAlnum(r):
		if c.pendingEnd {
			// "3.14", "e.g" : a terminator inside a token is no end.
			c.pendingEnd = false
		}
		if !c.tokenIsWord {
			c.tokenIsWord = true
			c.words++
			if c.words > c.limit[limWords] {
				c.over(limWords, at, end)
			}
			if !c.sentenceOpen {
				c.sentenceOpen = true
				c.sentences++
				if c.sentences > c.limit[limSentences] {
					c.over(limSentences, at, end)
				}
			}
		}
		c.wordLetters++
		if r > '9' || r < '0' {
			c.wordDigits = false
		}
		if c.wordLen < len(c.word) {
			if r < utf8.RuneSelf {
				c.word[c.wordLen] = byte(r) | 0x20 // ASCII lower case (digits unchanged)
				c.wordLen++
			} else {
				c.wordLen = len(c.word) // not an ASCII abbreviation
				c.wordLetters = 100
			}
		}
	case r == '.' || r == '!' || r == '?' || r == '…':
		if c.tokenIsWord && !c.noEnd(r) {
			c.pendingEnd = true
		}
	case r == '。' || r == '！' || r == '？':
		if c.tokenIsWord || c.sentenceOpen {
			c.sentenceOpen = false
		}
		c.inToken = false // CJK text has no spaces: the next rune starts afresh
	case r == '"' || r == '\'' || r == ')' || r == ']' || r == '”' || r == '’' || r == '*' || r == '_':
		// Closing quotes and emphasis after a terminator keep it pending.
	default:
		if c.pendingEnd {
			c.pendingEnd = false
		}
	}
	c.sizeChecks(at, end)
}

// noEnd reports whether a terminator after the current word is not a
// sentence end: an abbreviation, an initial or a list number.
func (c *Counter) noEnd(r rune) bool {
	if r != '.' {
		return false
	}
	if c.wordDigits && c.firstOnLine {
		return true // "1. First step"
	}
	if c.wordLetters == 1 && !c.wordDigits {
		return true // an initial: "J. Smith"
	}
	if c.wordLen <= len(c.word) && c.wordLetters <= len(c.word) {
		var buf [8]byte
		n := 0
		for _, b := range c.word[:c.wordLen] {
			if b != '.' {
				buf[n] = b
				n++
			}
		}
		return abbreviations[string(buf[:n])]
	}
	return false
}

func (c *Counter) newLine(at, end int) {
	c.lines++
	if c.lines > c.limit[limLines] {
		c.over(limLines, at, end)
	}
}

// sizeChecks checks the limits that grow with every rune. The token
// estimate is compared times 24 to avoid a division per rune.
func (c *Counter) sizeChecks(at, end int) {
	if c.runes > c.limit[limChars] {
		c.over(limChars, at, end)
	}
	if 3*end+16*c.words > c.limit[limTokens] {
		c.over(limTokens, at, end)
	}
}

// over reports a maximum the first time it is crossed.
func (c *Counter) over(lim, at, end int) {
	if c.hit[lim] {
		return
	}
	c.hit[lim] = true
	max := c.limit[lim]
	if lim == limTokens {
		max /= 24
	}
	c.findings = append(c.findings, validator.Finding{
		Check: Name, Reason: validator.ReasonLengthExceeded, Start: at, End: end,
		Message: fmt.Sprintf("too long: more than %d %s", max, limitNames[lim]),
	})
}
