package constraints

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Compile reads the system messages and the last user message of req for
// checkable instructions. Earlier user turns were answered already and do
// not bind this output.
//
// The compiler is a set of RE2 rules over the lower-cased instruction
// text, each guarded by a cheap substring test so that a prompt without
// any trigger word costs a few scans. Rules are written for the general
// phrasing ("under|fewer than|at most N words", "do not use X library"),
// not for a list of prompts; where an instruction is ambiguous ("in 50
// words", a banned word that is not a library) the compiler prefers no
// check over a false alarm.
func Compile(req *validator.Request) []Check {
	var texts []string
	last := -1
	for i, m := range req.Messages {
		if m.Role == "user" {
			last = i
		}
	}
	for i, m := range req.Messages {
		if m.Role == "system" || m.Role == "developer" || i == last {
			texts = append(texts, m.Content)
		}
	}
	var out []Check
	for _, t := range texts {
		out = append(out, cachedText(t)...)
	}
	return merge(out)
}

// The compiled checks of a message text are cached: system prompts repeat
// across requests. The cache is bounded (cleared when full) and holds only
// texts up to cacheTextMax bytes. Cached checks are shared, so nothing may
// modify them (merge copies before it combines).
const (
	cacheMax     = 4096
	cacheTextMax = 16 << 10
)

var (
	cacheMu sync.RWMutex
	cache   = map[string][]Check{}
)

func cachedText(t string) []Check {
	if len(t) > cacheTextMax {
		return compileText(t)
	}
	cacheMu.RLock()
	cs, ok := cache[t]
	cacheMu.RUnlock()
	if ok {
		return cs
	}
	cs = compileText(t)
	cacheMu.Lock()
	if len(cache) >= cacheMax {
		clear(cache)
	}
	cache[t] = cs
	cacheMu.Unlock()
	return cs
}

// CompileText compiles one instruction text.
func CompileText(text string) []Check { return merge(compileText(text)) }

func compileText(orig string) []Check {
	if orig == "" {
		return nil
	}
	c := &compiler{orig: orig, low: asciiLower(orig)}
	for _, r := range rules {
		if containsAny(c.low, r.guard) && (r.need == nil || containsAny(c.low, r.need)) {
			r.apply(c)
		}
	}
	return c.out
}

// asciiLower lower-cases ASCII letters only, so byte offsets into the
// result are offsets into the original.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

type compiler struct {
	orig, low string
	out       []Check
	upperDone bool
}

func (c *compiler) add(name string, cfg map[string]any, src string) {
	c.out = append(c.out, Check{Name: name, Config: cfg, Source: strings.TrimSpace(src)})
}

type rule struct {
	guard []string // one must occur in the lower-cased text
	need  []string // when set, one of these must occur too
	apply func(c *compiler)
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// num matches a count written in digits or words.
const num = `(\d{1,6}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|a hundred|a dozen|a single|single)`

var numWords = map[string]int{"one": 1, "a single": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a dozen": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
	"sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
	"sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "a hundred": 100}

func parseNum(s string) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return numWords[s]
}

// relation words, grouped by meaning.
const (
	relMax     = `(?:at most|no more than|not more than|a maximum of|maximum of|max(?:imum)?|up to|not exceed(?:ing)?|within|no longer than|shorter than|not longer than)`
	relBelow   = `(?:under|fewer than|less than|below)`
	relMin     = `(?:at least|no less than|no fewer than|a minimum of|minimum of|min(?:imum)?)`
	relAbove   = `(?:more than|over|exceeding)`
	relAny     = `(` + relMax + `|` + relBelow + `|` + relMin + `|` + relAbove + `|exactly)`
	unitWords  = `words?`
	unitSent   = `sentences?`
	unitChars  = `(?:characters?|chars|letters)`
	unitParas  = `paragraphs?`
	anyQuote   = `["'“”‘’]`
	wordOrQuot = `(?:` + anyQuote + `([^"'“”‘’\n]{1,80})` + anyQuote + `|([\p{L}\d_\-]+))`
)

// bound maps a relation phrase and a number to (min, max, exactly).
func bound(rel string, n int) (lo, hi, eq int) {
	rel = strings.TrimSpace(rel)
	switch {
	case rel == "exactly":
		return 0, 0, n
	case relBelowRE.MatchString(rel):
		return 0, max(n-1, 0), 0
	case relAboveRE.MatchString(rel):
		return n + 1, 0, 0
	case relMinRE.MatchString(rel):
		return n, 0, 0
	}
	return 0, n, 0
}

var (
	relBelowRE  = regexp.MustCompile(`^` + relBelow + `$`)
	relAboveRE  = regexp.MustCompile(`^` + relAbove + `$`)
	relMinRE    = regexp.MustCompile(`^` + relMin + `$`)
	relUnitRE   = regexp.MustCompile(relAny + `\s+(?:a\s+total\s+of\s+)?` + num + `\s+(?:\w+\s+)?(` + unitWords + `|` + unitSent + `|` + unitChars + `|` + unitParas + `)\b`)
	unitOrRE    = regexp.MustCompile(num + `\s+(` + unitWords + `|` + unitSent + `|` + unitChars + `|` + unitParas + `)\s+or\s+(less|fewer|more|shorter|longer)`)
	orUnitRE    = regexp.MustCompile(num + `\s+or\s+(more|less|fewer)\s+(` + unitWords + `|` + unitSent + `|` + unitParas + `)\b`)
	rangeRE     = regexp.MustCompile(`\b(\d{1,6})\s*(?:to|-|–)\s*(\d{1,6})\s+(` + unitWords + `|` + unitSent + `)\b`)
	notLongerRE = regexp.MustCompile(`(?:not|n't|no)\s+(?:\w+\s+){0,3}?(?:longer|more)\s+than\s+` + num + `\s+(` + unitWords + `|` + unitSent + `|` + unitChars + `)\b`)
	plusWordsRE = regexp.MustCompile(`\b(\d{1,6})\+\s*(words?|sentences?)`)
	inNSentRE   = regexp.MustCompile(`\b(?:in|with|using|of|use)\s+(?:only\s+|just\s+)?` + num + `\s+(sentences?)\b`)
	wordLimitRE = regexp.MustCompile(`(?:word (?:limit|count)(?: of)?|limit (?:of|to))\s*:?\s*` + num + `(?:\s+words)?`)
)

var lengthUnits = []string{"word", "sentence", "char", "letter", "paragraph"}

func lengthRule(c *compiler) {
	spans := c.spans(lengthUnits, 60, 24)
	kept := spans[:0]
	for _, sp := range spans {
		if hasNumber(c.low[sp[0]:sp[1]]) {
			kept = append(kept, sp)
		}
	}
	if len(kept) == 0 {
		return
	}
	spans = kept
	add := func(unit string, lo, hi, eq int, src string) {
		switch {
		case strings.HasPrefix(unit, "word"):
			switch {
			case eq > 0:
				// "exactly N words": checked as a band of ±10%, since
				// word counts differ by tokenizer.
				c.add("length", map[string]any{"max_words": eq + eq/10 + 1, "min_words": max(eq-eq/10-1, 1)}, src)
			case hi > 0:
				c.add("length", map[string]any{"max_words": hi}, src)
			case lo > 0:
				c.add("length", map[string]any{"min_words": lo}, src)
			}
		case strings.HasPrefix(unit, "sentence"):
			switch {
			case eq > 0:
				c.add("length", map[string]any{"max_sentences": eq}, src)
				c.add("sentences", map[string]any{"min": eq}, src)
			case hi > 0:
				c.add("length", map[string]any{"max_sentences": hi}, src)
			case lo > 0:
				c.add("sentences", map[string]any{"min": lo}, src)
			}
		case strings.HasPrefix(unit, "char") || strings.HasPrefix(unit, "letter"):
			if hi > 0 {
				c.add("length", map[string]any{"max_chars": hi}, src)
			}
		case strings.HasPrefix(unit, "paragraph"):
			if eq > 0 {
				c.add("paragraphs", map[string]any{"exactly": eq}, src)
			} else if hi > 0 {
				c.add("length", map[string]any{"max_paragraphs": hi}, src)
			} else if lo > 0 {
				c.add("paragraphs", map[string]any{"min": lo}, src)
			}
		}
	}
	for _, m := range c.findIn(relUnitRE, spans) {
		rel, n, unit := c.low[m[2]:m[3]], parseNum(c.low[m[4]:m[5]]), c.low[m[6]:m[7]]
		if n == 0 {
			continue
		}
		// "the letter q at least 3 times" and "words with all capital
		// letters" belong to other rules.
		if strings.HasPrefix(unit, "letter") && strings.Contains(c.low[m[1]:min(len(c.low), m[1]+20)], "times") {
			continue
		}
		if strings.HasPrefix(unit, "paragraph") && strings.Contains(c.low, "***") {
			continue // paragraphs with a divider: the paragraphs rule
		}
		lo, hi, eq := bound(rel, n)
		add(unit, lo, hi, eq, c.orig[m[0]:m[1]])
	}
	for _, m := range c.findIn(unitOrRE, spans) {
		n, unit, dir := parseNum(c.low[m[2]:m[3]]), c.low[m[4]:m[5]], c.low[m[6]:m[7]]
		if dir == "more" || dir == "longer" {
			add(unit, n, 0, 0, c.orig[m[0]:m[1]])
		} else {
			add(unit, 0, n, 0, c.orig[m[0]:m[1]])
		}
	}
	for _, m := range c.findIn(orUnitRE, spans) {
		n, dir, unit := parseNum(c.low[m[2]:m[3]]), c.low[m[4]:m[5]], c.low[m[6]:m[7]]
		if dir == "more" {
			add(unit, n, 0, 0, c.orig[m[0]:m[1]])
		} else {
			add(unit, 0, n, 0, c.orig[m[0]:m[1]])
		}
	}
	for _, m := range c.findIn(rangeRE, spans) {
		lo, hi, unit := parseNum(c.low[m[2]:m[3]]), parseNum(c.low[m[4]:m[5]]), c.low[m[6]:m[7]]
		if lo > 0 && hi >= lo {
			add(unit, lo, 0, 0, c.orig[m[0]:m[1]])
			add(unit, 0, hi, 0, c.orig[m[0]:m[1]])
		}
	}
	for _, m := range c.findIn(notLongerRE, spans) {
		add(c.low[m[4]:m[5]], 0, parseNum(c.low[m[2]:m[3]]), 0, c.orig[m[0]:m[1]])
	}
	for _, m := range c.findIn(plusWordsRE, spans) {
		add(c.low[m[4]:m[5]], parseNum(c.low[m[2]:m[3]]), 0, 0, c.orig[m[0]:m[1]])
	}
	for _, m := range c.findIn(inNSentRE, spans) {
		add("sentence", 0, parseNum(c.low[m[2]:m[3]]), 0, c.orig[m[0]:m[1]])
	}
	for _, m := range c.findNear(wordLimitRE, []string{"limit"}, 24, 40) {
		add("word", 0, parseNum(c.low[m[2]:m[3]]), 0, c.orig[m[0]:m[1]])
	}
}

// findNear runs re only over windows of the text around the keywords
// (before and after bytes either side, widened to whitespace), and returns
// its submatch indices in the whole text. Regular expressions that open
// with optional parts cannot use RE2's literal prefix scan, so running
// them over a whole prompt costs far more than over the few places where
// their keyword occurs.
func (c *compiler) findNear(re *regexp.Regexp, kws []string, before, after int) [][]int {
	return c.findIn(re, c.spans(kws, before, after))
}

// spans returns the merged windows around the keywords.
func (c *compiler) spans(kws []string, before, after int) [][2]int {
	var spans [][2]int
	for _, kw := range kws {
		for off := 0; ; {
			i := strings.Index(c.low[off:], kw)
			if i < 0 {
				break
			}
			i += off
			lo, hi := max(0, i-before), min(len(c.low), i+len(kw)+after)
			for lo > 0 && c.low[lo-1] != ' ' && c.low[lo-1] != '\n' {
				lo--
			}
			for hi < len(c.low) && c.low[hi] != ' ' && c.low[hi] != '\n' {
				hi++
			}
			spans = append(spans, [2]int{lo, hi})
			off = i + len(kw)
		}
	}
	if len(spans) == 0 {
		return nil
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	merged := spans[:1]
	for _, s := range spans[1:] {
		last := &merged[len(merged)-1]
		if s[0] <= last[1] {
			last[1] = max(last[1], s[1])
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// findIn runs re over each span and returns its submatch indices in the
// whole text.
func (c *compiler) findIn(re *regexp.Regexp, spans [][2]int) [][]int {
	var out [][]int
	for _, s := range spans {
		for _, m := range re.FindAllStringSubmatchIndex(c.low[s[0]:s[1]], -1) {
			for k := range m {
				if m[k] >= 0 {
					m[k] += s[0]
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// hasNumber reports whether s holds a digit or a number word.
func hasNumber(s string) bool {
	start := -1
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] >= '0' && s[i] <= '9' {
			return true
		}
		if i < len(s) && s[i] >= 'a' && s[i] <= 'z' {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			if _, ok := numWords[s[start:i]]; ok {
				return true
			}
			if s[start:i] == "dozen" || s[start:i] == "single" {
				return true
			}
		}
		start = -1
	}
	return false
}

// findNearOne is findNear's first match, or nil.
func (c *compiler) findNearOne(re *regexp.Regexp, kws []string, before, after int) []int {
	if ms := c.findNear(re, kws, before, after); len(ms) > 0 {
		return ms[0]
	}
	return nil
}
