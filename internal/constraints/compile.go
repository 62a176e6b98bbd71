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
// A request that declares tools is one step of an agent's loop, and its
// system and developer messages are the agent program's manual for the
// whole session: how to write commit messages, plans, headers, final
// summaries, each under its own condition ("make headers 1-3 words",
// "end commit messages with Co-Authored-By"). No sentence of such a
// manual says what this one output must be, so with tools declared only
// the user's turn is compiled. An application's own system prompt
// without tools ("always answer in under 100 words") still binds.
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
		if (m.Role == "system" || m.Role == "developer") && len(req.Tools) == 0 || i == last {
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
	wordLimitRE = regexp.MustCompile(`(?:word (?:limit|count)(?: of)?|limit (?:of|to))\s*:?\s*` + num + `(?:\s+words)?`)
)

func lengthRule(c *compiler) {
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
	toks := tokenize(c.low)
	for u, t := range toks {
		unit, ok := lengthUnit(t.s)
		if !ok {
			continue
		}
		src := func(from int) string { return c.orig[toks[from].start:t.end] }
		// "the letter q ... times", "words with all capital letters": other rules.
		if unit == "letter" && (u > 0 && (toks[u-1].s == "capital" || toks[u-1].s == "lowercase") || c.near(t.end, 30, "times", "appear")) {
			continue
		}
		if unit == "paragraph" && strings.Contains(c.low, "***") {
			continue // paragraphs with a divider: the paragraphs rule
		}
		if aboutPart(c, toks, u) {
			continue // "headers of 1-3 words", "10 words per bullet": not the whole answer
		}
		k := u - 1
		if k >= 0 && parseNum(strings.TrimSuffix(toks[k].s, "+")) == 0 && k-1 >= 0 && parseNum(toks[k-1].s) > 0 && !isRelWord(toks[k].s) {
			k-- // one adjective between: "50 short words"
		}
		if k < 0 {
			continue
		}
		n := parseNum(strings.TrimSuffix(toks[k].s, "+"))
		if n == 0 {
			// "N or more words" has "more" before the unit: handled from the number.
			continue
		}
		// "20 to 25 sentences", "20-25 sentences"
		lo, from := 0, k
		switch {
		case k-2 >= 0 && (toks[k-1].s == "to" || toks[k-1].s == "and") && parseNum(toks[k-2].s) > 0:
			lo, from = parseNum(toks[k-2].s), k-2
		case k-1 >= 0 && parseNum(toks[k-1].s) > 0 && (c.low[toks[k-1].end:toks[k].start] == "-" || c.low[toks[k-1].end:toks[k].start] == "–"):
			lo, from = parseNum(toks[k-1].s), k-1
		}
		if lo > 0 && n >= lo {
			add(unit, lo, 0, 0, src(from))
			add(unit, 0, n, 0, src(from))
			continue
		}
		if strings.HasSuffix(toks[k].s, "+") {
			add(unit, n, 0, 0, src(k))
			continue
		}
		// "N words or fewer"
		if u+2 < len(toks) && toks[u+1].s == "or" {
			switch toks[u+2].s {
			case "less", "fewer", "shorter":
				add(unit, 0, n, 0, src(k))
				continue
			case "more", "longer":
				add(unit, n, 0, 0, src(k))
				continue
			}
		}
		rel, from := relationBefore(c, toks, k)
		switch {
		case rel == "":
			// "in 2 sentences", "use only 10 words": a maximum for sentences
			// and words only when led by in/with/using.
			if k-1 >= 0 && (unit == "sentence" || unit == "word") {
				j := k - 1
				if toks[j].s == "only" || toks[j].s == "just" || toks[j].s == "a" {
					j--
				}
				if j >= 0 && (toks[j].s == "in" || toks[j].s == "with" || toks[j].s == "using" || toks[j].s == "use") && unit == "sentence" {
					add(unit, 0, n, 0, src(j))
				}
			}
		case rel == "negmore":
			add(unit, 0, n, 0, src(from))
		default:
			lo, hi, eq := bound(rel, n)
			add(unit, lo, hi, eq, src(from))
		}
	}
	// "N or more words", "N or fewer sentences"
	for k := 0; k+3 < len(toks); k++ {
		n := parseNum(toks[k].s)
		if n == 0 || toks[k+1].s != "or" {
			continue
		}
		unit, ok := lengthUnit(toks[k+3].s)
		if !ok {
			continue
		}
		src := c.orig[toks[k].start:toks[k+3].end]
		switch toks[k+2].s {
		case "more":
			add(unit, n, 0, 0, src)
		case "less", "fewer":
			add(unit, 0, n, 0, src)
		}
	}
	if strings.Contains(c.low, "limit") {
		for _, m := range c.findNear(wordLimitRE, []string{"limit"}, 24, 40) {
			add("word", 0, parseNum(c.low[m[2]:m[3]]), 0, c.orig[m[0]:m[1]])
		}
	}
}

// partNouns name a part of an answer that a length can be asked of
// without the answer as a whole being meant: "keep headers short (1-3
// words)", "a title of at most 5 words", "10 words per bullet".
var partNouns = map[string]bool{
	"header": true, "headers": true, "heading": true, "headings": true, "headline": true, "headlines": true,
	"title": true, "titles": true, "subtitle": true, "subtitles": true, "caption": true, "captions": true,
	"label": true, "labels": true, "bullet": true, "bullets": true, "item": true, "items": true,
	"slogan": true, "slogans": true, "tagline": true, "taglines": true, "update": true, "updates": true,
}

// relFiller are the words of relation phrases that isRelWord does not
// name ("at most", "no more than", "a total of").
var relFiller = map[string]bool{"at": true, "no": true, "not": true, "than": true, "of": true, "to": true, "a": true, "up": true, "total": true}

// partWindow is how many words before a length phrase the thing it
// measures is looked for ("headers short (1-3 words)": two).
const partWindow = 4

// aboutPart reports whether the length phrase whose unit is toks[u]
// measures a part of the answer rather than the answer: the unit is
// followed by "each", "apiece" or "per" ("20 words each"), or by
// "for"/"in" and a part noun ("8-12 words for quick headers"), or a part
// noun or "each"/"every" stands in the few words before its number in
// the same clause ("each bullet under 10 words", "keep headers short
// (1-3 words)"). "Title Case" names a letter case, not a title.
func aboutPart(c *compiler, toks []token, u int) bool {
	clauseBreak := func(a, b int) bool { return strings.ContainsAny(c.low[a:b], ".!?;\n") }
	if u+1 < len(toks) && !clauseBreak(toks[u].end, toks[u+1].start) {
		switch toks[u+1].s {
		case "each", "apiece", "per":
			return true
		case "for", "in":
			for j := u + 2; j < min(len(toks), u+5) && !clauseBreak(toks[j-1].end, toks[j].start); j++ {
				if isPartNoun(toks, j) {
					return true
				}
			}
		}
	}
	// the number: the first token before the unit that is one
	k := u - 1
	for k >= 0 && u-k <= 2 && parseNum(strings.TrimSuffix(toks[k].s, "+")) == 0 {
		k--
	}
	if k < 0 || parseNum(strings.TrimSuffix(toks[k].s, "+")) == 0 {
		return false
	}
	// The words before the number, the relation phrase not counted; a
	// comma ends the search as a clause break does: "a title in
	// <<brackets>>, and less than 5 sentences" lists two things asked of
	// the answer.
	for j, n := k-1, 0; j >= 0 && n < partWindow; j-- {
		if gap := c.low[toks[j].end:toks[j+1].start]; strings.ContainsAny(gap, ".!?;,\n") {
			break
		}
		switch w := toks[j].s; {
		case (w == "each" || w == "every") && !(j+1 < len(toks) && wholeAnswer[toks[j+1].s]):
			return true
		case isPartNoun(toks, j):
			return true
		case isRelWord(w) || relFiller[w] || parseNum(w) > 0:
		default:
			n++
		}
	}
	return false
}

// wholeAnswer are the nouns after "each" or "every" that name the whole
// answer, not a part of it ("keep every answer under 40 words").
var wholeAnswer = map[string]bool{"answer": true, "answers": true, "reply": true, "replies": true, "response": true, "responses": true, "message": true, "messages": true}

// isPartNoun reports whether toks[j] names a part of the answer. A part
// noun that is what the request asks for ("write a tagline of less than
// 200 characters", "give me a title under 10 words": a request verb,
// maybe "me", an article, maybe one adjective) is the answer itself.
func isPartNoun(toks []token, j int) bool {
	if !partNouns[toks[j].s] {
		return false
	}
	if strings.HasPrefix(toks[j].s, "title") && j+1 < len(toks) && toks[j+1].s == "case" {
		return false
	}
	for i := j - 1; i >= 0 && j-i <= 4; i-- {
		switch w := toks[i].s; {
		case w == "a" || w == "an" || w == "one" || w == "me" || w == "us":
			continue
		case requestVerbs[w]:
			return !(toks[i+1].s == "a" || toks[i+1].s == "an" || toks[i+1].s == "one" || toks[i+1].s == "me" || toks[i+1].s == "us")
		}
		if i < j-1 { // at most one other word (an adjective) between
			break
		}
	}
	return true
}

// requestVerbs ask for an output: "write a title ..." asks for a title.
var requestVerbs = map[string]bool{"write": true, "give": true, "create": true, "generate": true, "suggest": true,
	"provide": true, "propose": true, "draft": true, "compose": true, "produce": true, "invent": true, "craft": true}

// token is a word of the lower-cased text with its offsets.
type token struct {
	s          string
	start, end int
}

// tokenize splits on everything but letters, digits, apostrophes and a
// trailing "+" ("300+").
func tokenize(s string) []token {
	var out []token
	start := -1
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			b := s[i]
			if b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '\'' || (b == '+' && start >= 0) {
				if start < 0 {
					start = i
				}
				continue
			}
		}
		if start >= 0 {
			out = append(out, token{s[start:i], start, i})
			start = -1
		}
	}
	return out
}

func lengthUnit(w string) (string, bool) {
	switch w {
	case "word", "words":
		return "word", true
	case "sentence", "sentences":
		return "sentence", true
	case "character", "characters", "chars", "letters":
		return "char", true
	case "paragraph", "paragraphs":
		return "paragraph", true
	}
	return "", false
}

// relations, longest first; each is matched against the words before the
// number.
var relations = [][]string{
	{"no", "more", "than"}, {"not", "more", "than"}, {"no", "longer", "than"}, {"not", "longer", "than"},
	{"no", "less", "than"}, {"no", "fewer", "than"}, {"a", "maximum", "of"}, {"a", "minimum", "of"},
	{"not", "exceeding"}, {"not", "exceed"}, {"at", "most"}, {"at", "least"}, {"maximum", "of"}, {"minimum", "of"},
	{"up", "to"}, {"fewer", "than"}, {"less", "than"}, {"more", "than"}, {"shorter", "than"}, {"longer", "than"},
	{"under"}, {"below"}, {"within"}, {"over"}, {"exceeding"}, {"exactly"}, {"maximum"}, {"max"}, {"minimum"}, {"min"},
}

func isRelWord(w string) bool {
	for _, r := range relations {
		if r[len(r)-1] == w {
			return true
		}
	}
	return false
}

// relationBefore reads the relation phrase that ends just before token k
// (skipping "a total of"), and returns it as bound() expects, or "negmore"
// for "not ... longer/more than N" ("I don't want anything longer than 30
// words"), with the index of its first token.
func relationBefore(c *compiler, toks []token, k int) (string, int) {
	j := k
	if j-3 >= 0 && toks[j-3].s == "a" && toks[j-2].s == "total" && toks[j-1].s == "of" {
		j -= 3
	}
	for _, r := range relations {
		if j-len(r) < 0 {
			continue
		}
		ok := true
		for i, w := range r {
			if toks[j-len(r)+i].s != w {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		from := j - len(r)
		// the phrase must be contiguous text: no sentence break inside
		if strings.ContainsAny(c.low[toks[from].start:toks[k].start], ".!?\n") {
			return "", k
		}
		rel := strings.Join(r, " ")
		if rel == "more than" || rel == "longer than" {
			for i := max(0, from-4); i < from; i++ {
				if w := toks[i].s; w == "not" || w == "no" || strings.HasSuffix(w, "n't") {
					return "negmore", i
				}
			}
			if rel == "longer than" {
				return "more than", from
			}
		}
		switch rel {
		case "no longer than", "not longer than", "shorter than", "not exceeding", "not exceed", "maximum", "max":
			rel = "at most"
		case "minimum", "min":
			rel = "at least"
		}
		return rel, from
	}
	return "", k
}

// near reports whether one of the words occurs within n bytes after i.
func (c *compiler) near(i, n int, words ...string) bool {
	w := c.low[i:min(len(c.low), i+n)]
	for _, x := range words {
		if strings.Contains(w, x) {
			return true
		}
	}
	return false
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

// findNearOne is findNear's first match, or nil.
func (c *compiler) findNearOne(re *regexp.Regexp, kws []string, before, after int) []int {
	if ms := c.findNear(re, kws, before, after); len(ms) > 0 {
		return ms[0]
	}
	return nil
}
