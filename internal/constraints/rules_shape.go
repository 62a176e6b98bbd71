package constraints

// Rules for the shape of the answer: how often a word appears, where it
// ends, its case, commas, title, bullets, sections, postscript,
// placeholders, highlights, repeated prompts, paragraphs and options.

import (
	"fmt"
	"regexp"
	"strings"
)

const timesPat = `(?:(?:` + relAny + `\s+)?(?:` + num + `\s+(?:or\s+(more|less|fewer)\s+)?times?|(once|twice|thrice)))`

var (
	wordFreqRE   = regexp.MustCompile(`\b(?:key)?word\s+` + wordOrQuot + `\s+(?:(?:should|must|to|has|needs|appears?|occurs?|be|used|included|in|your|the|entire|response|answer|reply|post|essay|story|poem|article|for|a|total|of)\s+){0,6}` + timesPat)
	letterFreqRE = regexp.MustCompile(`letter\s+` + anyQuote + `?([a-z])` + anyQuote + `?\s+(?:(?:should|must|to|has|needs|appears?|occurs?|be|used|included|in|your|the|entire|response|answer)\s+){0,6}` + timesPat)
	symbolRE     = regexp.MustCompile(relAny + `?\s*` + num + `\s+(?:or\s+more\s+)?(exclamation marks?|hashtags?|question marks?)`)
)

// timesBound reads timesPat's groups starting at g: relation, number, "or
// more|less", once/twice/thrice.
func timesBound(low string, m []int, g int) (lo, hi, eq int) {
	rel := ""
	if m[g] >= 0 {
		rel = low[m[g]:m[g+1]]
	}
	n := 0
	switch {
	case m[g+2] >= 0:
		n = parseNum(low[m[g+2]:m[g+3]])
	case m[g+6] >= 0:
		n = map[string]int{"once": 1, "twice": 2, "thrice": 3}[low[m[g+6]:m[g+7]]]
	}
	if m[g+4] >= 0 {
		if low[m[g+4]:m[g+5]] == "more" {
			return n, 0, 0
		}
		return 0, n, 0
	}
	if rel == "" {
		return n, 0, 0 // "use the word X 3 times": at least
	}
	return bound(rel, n)
}

func frequencyRule(c *compiler) {
	var words, letters []any
	var srcs []string
	for _, m := range c.findNear(wordFreqRE, []string{"word"}, 10, 150) {
		w := ""
		if m[2] >= 0 {
			w = c.orig[m[2]:m[3]]
		} else {
			w = c.orig[m[4]:m[5]]
		}
		lo, hi, eq := timesBound(c.low, m, 6)
		if lo+hi+eq == 0 {
			continue
		}
		words = append(words, map[string]any{"word": w, "min": lo, "max": hi, "exactly": eq})
		srcs = append(srcs, c.orig[m[0]:m[1]])
	}
	for _, m := range c.findNear(letterFreqRE, []string{"letter"}, 10, 120) {
		lo, hi, eq := timesBound(c.low, m, 4)
		if lo+hi+eq == 0 {
			continue
		}
		letters = append(letters, map[string]any{"letter": c.low[m[2]:m[3]], "min": lo, "max": hi, "exactly": eq})
		srcs = append(srcs, c.orig[m[0]:m[1]])
	}
	for _, m := range c.findNear(symbolRE, []string{"exclamation", "hashtag", "question mark"}, 40, 20) {
		rel := "at least"
		if m[2] >= 0 {
			rel = c.low[m[2]:m[3]]
		}
		lo, hi, eq := bound(rel, parseNum(c.low[m[4]:m[5]]))
		sym := map[byte]string{'e': "!", 'h': "#", 'q': "?"}[c.low[m[6]]]
		letters = append(letters, map[string]any{"letter": sym, "min": lo, "max": hi, "exactly": eq})
		srcs = append(srcs, c.orig[m[0]:m[1]])
	}
	if len(words)+len(letters) > 0 {
		cfg := map[string]any{}
		if len(words) > 0 {
			cfg["words"] = words
		}
		if len(letters) > 0 {
			cfg["letters"] = letters
		}
		c.add("keywords", cfg, strings.Join(srcs, "; "))
	}
	// A sentence about words in capitals with a count: "those all-caps
	// words should appear at most 10 times", "more than 4 words be in all
	// capital letters".
	for _, sent := range sentences(c.low) {
		if !capPhraseRE.MatchString(sent.text) || !strings.Contains(sent.text, "word") {
			continue
		}
		m := relNumRE.FindAllStringSubmatchIndex(sent.text, -1)
		if len(m) == 0 {
			continue
		}
		pick := m[len(m)-1]
		for _, x := range m {
			if strings.HasPrefix(strings.TrimSpace(sent.text[x[1]:]), "word") || strings.HasPrefix(strings.TrimSpace(sent.text[x[1]:]), "time") {
				pick = x
			}
		}
		lo, hi, eq := bound(sent.text[pick[2]:pick[3]], parseNum(sent.text[pick[4]:pick[5]]))
		c.add("capital_words", map[string]any{"min": lo, "max": hi, "exactly": eq}, c.orig[sent.start:sent.end])
		c.upperDone = true
		return
	}
}

var (
	capPhraseRE = regexp.MustCompile(`all[- ]caps|all capital|capitalized|in capitals`)
	relNumRE    = regexp.MustCompile(relAny + `\s+` + num + `\b`)
)

var (
	endLeadRE        = regexp.MustCompile(`(?:\b(?:end|finish|conclude)\s+(?:[\w']+\s+){0,4}?with|(?:very\s+)?(?:last|final|end)\s+(?:sentence|line|words?|part)?\s*(?:of\s+(?:your|the|this)\s+(?:entire\s+|whole\s+)?[\w ]{1,20}?)?\s*(?:should|must)\s+(?:be|read)(?:\s+exactly)?(?:\s+like)?)(?:\s+(?:the|this|a))?(?:\s+(?:exact|following|exactly))*(?:\s+(?:phrase|sentence|words?|question|line|statement))?(?:\s+of)?\s*:?\s*`)
	postscriptLeadRE = regexp.MustCompile(`^(?:a\s+)?(?:postscript|post script|p\.\s?s)`)
	dqPhraseRE       = regexp.MustCompile(`^["“”]([^"“”\n]{1,160})["“”]`)
	linePhrase       = regexp.MustCompile(`^([^\n]{1,160})`)
)

func endPhraseRule(c *compiler) {
	m := c.findNearOne(endLeadRE, []string{"end", "finish", "conclude", "last", "final"}, 60, 120)
	if m == nil {
		return
	}
	rest := c.orig[m[1]:]
	var phrase string
	if q := dqPhraseRE.FindStringSubmatch(rest); q != nil {
		phrase = q[1]
	} else if l := linePhrase.FindStringSubmatch(strings.TrimLeft(rest, " \n")); l != nil {
		phrase = strings.TrimSpace(l[1])
		// unquoted: the phrase runs to the end of the line; an
		// instruction following it on the line makes it unusable.
		if low := asciiLower(phrase); strings.Contains(low, " and no ") || strings.Contains(low, "no other words") || len(strings.Fields(phrase)) > 20 {
			return
		}
	}
	phrase = strings.TrimSpace(phrase)
	if phrase == "" || postscriptLeadRE.MatchString(asciiLower(phrase)) {
		return
	}
	c.add("end_phrase", map[string]any{"phrase": phrase}, c.orig[m[0]:min(len(c.orig), m[1]+len(phrase))])
}

var (
	quoteVerbRE  = regexp.MustCompile(`wrap|enclos|surround|around|put|within|inside|between`)
	quoteWholeRE = regexp.MustCompile(`entire|whole|(?:your|the)\s+(?:response|answer|reply|output)`)
)

// quotedRule: a sentence that speaks of double quotation marks, a verb of
// wrapping and the whole response.
func quotedRule(c *compiler) {
	for _, sent := range sentences(c.low) {
		if !strings.Contains(sent.text, "double quot") {
			continue
		}
		if quoteVerbRE.MatchString(sent.text) && quoteWholeRE.MatchString(sent.text) {
			c.add("quoted", map[string]any{}, c.orig[sent.start:sent.end])
			return
		}
	}
}

type span struct {
	text       string
	start, end int
}

// sentences splits text at . ! ? and newlines (roughly; enough to scope
// an instruction).
func sentences(s string) []span {
	var out []span
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.', '!', '?', '\n':
			if s[i] == '.' && i+1 < len(s) && s[i+1] != ' ' && s[i+1] != '\n' {
				continue
			}
			if i > start {
				out = append(out, span{s[start:i], start, i})
			}
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, span{s[start:], start, len(s)})
	}
	return out
}

var (
	lowerRE = regexp.MustCompile(`(?:all\s+(?:in\s+)?lower\s?case|lower\s?case\s+(?:letters\s+)?only|only\s+(?:use\s+)?lower\s?case|in\s+lower\s?case\s+letters|no\s+capital\s+letters(?:\s+are\s+allowed)?|entirely\s+in\s+lower\s?case|must\s+be\s+(?:in\s+)?lower\s?case|(?:do not|don't|not)\s+use\s+any\s+(?:capital|upper\s?case)\s+letters)`)
	upperRE = regexp.MustCompile(`(?:all\s+(?:in\s+)?(?:capital|upper\s?case)\s+letters|all\s+(?:in\s+)?(?:caps|capitals|upper\s?case)\b|(?:capital|upper\s?case)\s+letters\s+only|only\s+(?:use\s+)?(?:capital|upper\s?case)\s+letters|entirely\s+in\s+(?:capital|upper\s?case)|in\s+(?:english\s+)?(?:and\s+)?(?:in\s+)?all\s+capital|must\s+be\s+(?:in\s+)?(?:all\s+)?(?:upper\s?case|capital letters))`)
)

func caseRule(c *compiler) {
	if !strings.Contains(c.low, "case") && !strings.Contains(c.low, "capital") && !strings.Contains(c.low, "caps") {
		return
	}
	if !containsAny(c.low, []string{"lower", "capital letter", "upper", "caps", "capitals", "capitali"}) {
		return // "the capital of France"
	}
	if m := c.findNearOne(lowerRE, []string{"lower", "capital"}, 40, 30); m != nil {
		c.add("letter_case", map[string]any{"case": "lower"}, c.orig[m[0]:m[1]])
		return
	}
	if c.upperDone {
		return // "words with all capital letters at least N times"
	}
	// Sentence level: a mention of letter case, a whole-response cue, no
	// count (a count belongs to capital_words).
	for _, sent := range sentences(c.low) {
		t := sent.text
		if !caseWordRE.MatchString(t) || !wholeCueRE.MatchString(t) || countCueRE.MatchString(t) {
			continue
		}
		lower := strings.Contains(t, "lowercase") || strings.Contains(t, "lower case") || strings.Contains(t, "lowercased")
		negCap := negCapRE.MatchString(t)
		switch {
		case (lower && !strings.Contains(t, "no lowercase") && !strings.Contains(t, "contain lowercase")) || negCap:
			c.add("letter_case", map[string]any{"case": "lower"}, c.orig[sent.start:sent.end])
			return
		case strings.Contains(t, "capital") || strings.Contains(t, "upper") || strings.Contains(t, "caps") || strings.Contains(t, "lowercase"):
			c.add("letter_case", map[string]any{"case": "upper"}, c.orig[sent.start:sent.end])
			return
		}
	}
	if m := c.findNearOne(upperRE, []string{"capital", "caps", "upper"}, 40, 30); m != nil {
		// "words with all capital letters" is a frequency, not the case rule.
		if strings.Contains(c.low[max(0, m[0]-20):m[0]], "word") {
			return
		}
		c.add("letter_case", map[string]any{"case": "upper"}, c.orig[m[0]:m[1]])
	}
}

var (
	caseWordRE = regexp.MustCompile(`capital|upper\s?case|lower\s?case|lowercased|\bcaps\b`)
	wholeCueRE = regexp.MustCompile(`\b(?:all|every|entire|whole|only|not a single|no)\b`)
	countCueRE = regexp.MustCompile(`\btimes?\b|at least|at most|less than|fewer than|more than|\b\d+\b`)
	negCapRE   = regexp.MustCompile(`(?:without|no|not|n't|never)\s+(?:\w+\s+){0,6}?(?:capital|capitali[sz]ed|upper\s?case)`)
)

var commaRE = regexp.MustCompile(`(?:no\s+commas|without\s+(?:using\s+|any\s+|a\s+single\s+)*commas?|(?:not|never|n't|avoid|refrain from|forbidden to|prohibited from)\s+(?:\w+\s+){0,4}?(?:any\s+|a\s+single\s+)?commas?|commas?\s+(?:are|is)\s+(?:not\s+allowed|forbidden|prohibited|banned)|zero\s+commas)`)

func commaRule(c *compiler) {
	if m := c.findNearOne(commaRE, []string{"comma"}, 60, 8); m != nil {
		c.add("no_commas", map[string]any{}, c.orig[m[0]:m[1]])
	}
}

var titleRE = regexp.MustCompile(`(?:title|heading|name)[^.\n]{0,60}<<|<<\s*title\s*>>|double\s+angular\s+brackets`)

func titleRule(c *compiler) {
	if m := c.findNearOne(titleRE, []string{"<<", "angular"}, 80, 20); m != nil {
		c.add("title", map[string]any{}, c.orig[m[0]:m[1]])
	}
}

var bulletsRE = regexp.MustCompile(relAny + `?\s*` + num + `\s+(?:markdown\s+)?bullet(?:\s*points?|s|ed\s+(?:points|items|list items))?|bullet(?:ed)?\s+(?:point\s+)?list\s+(?:with|of)\s+` + relAny + `?\s*` + num + `\s+(?:items|points|bullets)`)

func bulletsRule(c *compiler) {
	m := c.findNearOne(bulletsRE, []string{"bullet"}, 40, 60)
	if m == nil {
		return
	}
	g := 2
	if m[4] < 0 {
		g = 6
	}
	rel := "exactly"
	if m[g] >= 0 {
		rel = c.low[m[g]:m[g+1]]
	}
	lo, hi, eq := bound(rel, parseNum(c.low[m[g+2]:m[g+3]]))
	c.add("bullets", map[string]any{"min": lo, "max": hi, "exactly": eq}, c.orig[m[0]:m[1]])
}

var (
	sectionCountRE    = regexp.MustCompile(relAny + `?\s*` + num + `[\s-]+(?:\w+\s+)?(?:sections?|parts?|paragraphs?|chapters?)\b`)
	sectionSplitterRE = regexp.MustCompile(`(?:mark|begin|start|label|denote|note|noted|indicate|title|number|name|head)[^\n.]{0,60}?(?:with|as|using|by)\s+(?:the\s+(?:word|text)\s+)?["'“]?([a-z]+)\s+(?:x|\d|\{|#|n\b|\[)|\(\s*([a-z]+)\s+1\s+and\s+[a-z]+\s+2\s*\)|["'“]([a-z]+)\s+1["'”]\s+and\s+["'“][a-z]+\s+2`)
)

func sectionsRule(c *compiler) {
	sm := c.findNearOne(sectionSplitterRE, []string{" x", " 1"}, 110, 24)
	if sm == nil {
		return
	}
	g := 2
	for g < len(sm)-2 && sm[g] < 0 {
		g += 2
	}
	splitter := c.orig[sm[g]:sm[g+1]]
	m := c.findNearOne(sectionCountRE, []string{"section", "part", "paragraph", "chapter"}, 40, 2)
	if m == nil {
		return
	}
	rel := "exactly"
	if m[2] >= 0 {
		rel = c.low[m[2]:m[3]]
	}
	lo, hi, eq := bound(rel, parseNum(c.low[m[4]:m[5]]))
	if eq > 0 {
		lo, eq = eq, 0 // IFEval counts "N sections" as at least N
	}
	c.add("sections", map[string]any{"splitter": splitter, "min": lo, "max": hi, "exactly": eq}, c.orig[sm[0]:sm[1]])
}

var (
	postscriptMarkerRE = regexp.MustCompile(`(?:postscript|post script|p\.s\.|p\.p\.s)[^\n]{0,40}?(?:start(?:ing|s)?|begin(?:ning|s)?|marked|with)\s+(?:with\s+)?['"“]?(p\.\s?p\.\s?s\.?|p\.\s?s\.?)`)
	postscriptRE       = regexp.MustCompile(`(?:add|include|end with|write|with)\s+(?:a\s+)?(?:postscript|post script|p\.s\.)`)
)

func postscriptRule(c *compiler) {
	if m := c.findNearOne(postscriptMarkerRE, []string{"p.s", "p. s", "postscript", "post script", "p.p.s"}, 4, 80); m != nil {
		marker := strings.ToUpper(strings.ReplaceAll(c.low[m[2]:m[3]], " ", ""))
		c.add("postscript", map[string]any{"marker": marker}, c.orig[m[0]:m[1]])
		return
	}
	if m := c.findNearOne(postscriptRE, []string{"p.s", "postscript", "post script"}, 30, 16); m != nil {
		c.add("postscript", map[string]any{"marker": "P.S."}, c.orig[m[0]:m[1]])
	}
}

var placeholdersRE = regexp.MustCompile(relAny + `?\s*` + num + `\s+placeholders?`)

func placeholdersRule(c *compiler) {
	m := c.findNearOne(placeholdersRE, []string{"placeholder"}, 40, 4)
	if m == nil {
		return
	}
	rel := "at least"
	if m[2] >= 0 {
		rel = c.low[m[2]:m[3]]
	}
	lo, hi, eq := bound(rel, parseNum(c.low[m[4]:m[5]]))
	c.add("placeholders", map[string]any{"min": lo, "max": hi, "exactly": eq}, c.orig[m[0]:m[1]])
}

// highlightsRule: "highlight at least 3 sections", "at least 15 sections
// should be highlighted", "italicize at least 10 text parts". Token based:
// a highlight word and a count within a few words of it.
func highlightsRule(c *compiler) {
	toks := tokenize(c.low)
	for h, t := range toks {
		if !strings.HasPrefix(t.s, "highlight") && !strings.HasPrefix(t.s, "italic") {
			continue
		}
		k := -1
		for j := h + 1; j < min(len(toks), h+5) && k < 0; j++ {
			if parseNum(toks[j].s) > 0 {
				k = j
			}
		}
		for j := h - 1; j >= max(0, h-8) && k < 0; j-- {
			if parseNum(toks[j].s) > 0 {
				k = j
			}
		}
		n, rel, from := 0, "at least", h
		if k >= 0 {
			n = parseNum(toks[k].s)
			if r, f := relationBefore(c, toks, k); r != "" && r != "negmore" {
				rel, from = r, min(f, h)
			}
		} else {
			// "highlight the name", "highlight key points": at least one
			for j := h + 1; j < min(len(toks), h+5); j++ {
				switch strings.TrimSuffix(toks[j].s, "s") {
				case "section", "part", "phrase", "word", "text", "name", "title", "point", "line", "sentence", "item", "keyword":
					n = 1
				}
			}
		}
		if n == 0 {
			continue
		}
		lo, hi, eq := bound(rel, n)
		if eq > 0 {
			lo, eq = eq, 0 // IFEval counts highlights as at least N
		}
		end := t.end
		if k > h {
			end = toks[k].end
		}
		c.add("highlights", map[string]any{"min": lo, "max": hi, "exactly": eq}, c.orig[toks[from].start:end])
		return
	}
}

var (
	twoRE      = regexp.MustCompile(`\b(?:two|2)\s+(?:different\s+|separate\s+|distinct\s+)?(?:[a-z]+\s+)?(?:responses|answers|versions|jokes|critiques|poems|stories|options|replies|\w+s)\b`)
	sixStarsRE = regexp.MustCompile(`\*{6}|(?:6|six)\s+asterisks?`)
)

func twoResponsesRule(c *compiler) {
	if !sixStarsRE.MatchString(c.low) {
		return
	}
	if m := twoRE.FindStringIndex(c.low); m != nil {
		c.add("two_responses", map[string]any{}, c.orig[m[0]:m[1]])
		return
	}
	// "Separate the essay and the poem with 6 asterisk symbols": a
	// separator between two named parts.
	for _, sent := range sentences(c.low) {
		if sixStarsRE.MatchString(sent.text) && strings.Contains(sent.text, "separat") {
			c.add("two_responses", map[string]any{}, c.orig[sent.start:sent.end])
			return
		}
	}
}

var repeatRE = regexp.MustCompile(`repeat\s+(?:all\s+|the\s+|my\s+|this\s+|your\s+)?(?:exact\s+|original\s+|following\s+|entire\s+|whole\s+|first\s+)*(?:request|question|prompt|instructions?|sentence|query|task|text|line)s?(?:\s+(above|below))?(?:\s+(?:word\s+(?:for|by)\s+word|exactly|verbatim|without\s+change|first))?`)

// repeatRule: "first repeat the request (above|below) word for word". The
// text to repeat is the rest of the message: before the asking sentence,
// or after it with "below".
func repeatRule(c *compiler) {
	m := repeatRE.FindStringSubmatchIndex(c.low)
	if m == nil {
		return
	}
	var text string
	if strings.Contains(c.low[m[0]:m[1]], "first line") {
		line, _, _ := strings.Cut(c.orig, "\n")
		text = line
	} else if m[2] >= 0 && c.low[m[2]:m[3]] == "below" {
		// the request is the last paragraph, after the asking one
		rest := c.orig[m[1]:]
		i := strings.LastIndex(rest, "\n\n")
		if i < 0 {
			i = strings.IndexByte(rest, '\n')
		}
		if i < 0 {
			return
		}
		text = rest[i:]
	} else {
		start := strings.LastIndexAny(c.orig[:m[0]], "\n")
		if start < 0 {
			start = strings.LastIndex(c.orig[:m[0]], ". ")
			if start >= 0 {
				start++
			}
		}
		if start <= 0 {
			return
		}
		text = c.orig[:start]
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	c.add("repeat_prompt", map[string]any{"text": text}, c.orig[m[0]:m[1]])
}

var (
	parasDividerRE = regexp.MustCompile(num + `\s+(?:paragraphs?|sections?|parts?|stanzas?|verses?|chapters?)[^\n]{0,160}?\*\*\*|\*\*\*[^\n]{0,160}?` + num + `\s+(?:paragraphs?|sections?|parts?|stanzas?|verses?|chapters?)`)
	parasExactRE   = regexp.MustCompile(`(?:exactly|have|of|in|with|into|write|contain|be)\s+` + num + `\s+paragraphs?`)
	nthFirstRE     = regexp.MustCompile(`(?:(?:(\d+)(?:st|nd|rd|th)|(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|final|very first))\s+paragraph|paragraph\s+(\d+))\s+(?:must|should|has to|needs to|will|to)?\s*(?:start|begin)s?\s+with\s+(?:the\s+)?(?:word\s+)?` + wordOrQuot + `|(?:start|begin)\s+the\s+(?:(\d+)(?:st|nd|rd|th)|(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|final))\s+paragraph\s+with\s+(?:the\s+)?(?:word\s+)?` + wordOrQuot)
	ordinals       = map[string]int{"first": 1, "very first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10}
)

func paragraphsRule(c *compiler) {
	cfg := map[string]any{}
	var src string
	if m := c.findNearOne(parasDividerRE, []string{"***"}, 180, 180); m != nil {
		g := 2
		if m[2] < 0 {
			g = 4
		}
		cfg["exactly"] = parseNum(c.low[m[g]:m[g+1]])
		cfg["divider"] = "***"
		src = c.orig[m[0]:m[1]]
	}
	if _, ok := cfg["exactly"]; !ok {
		// a format template: "[part 1] *** [part 2] *** [part 3]", with
		// the divider on lines of its own and no "..." continuation.
		dividers, open := 0, false
		for _, l := range strings.Split(c.low, "\n") {
			switch t := strings.TrimSpace(l); {
			case t == "***":
				dividers++
			case t == "..." || strings.HasPrefix(t, "... "):
				open = true
			}
		}
		if dividers >= 2 && !open {
			cfg["exactly"] = dividers + 1
			cfg["divider"] = "***"
			src = "format template with *** dividers"
		}
	}
	if m := c.findNearOne(nthFirstRE, []string{"paragraph"}, 40, 80); m != nil {
		nth, last := 0, false
		for _, g := range []int{2, 6, 12} {
			if m[g] >= 0 {
				nth = parseNum(c.low[m[g]:m[g+1]])
			}
		}
		for _, g := range []int{4, 14} {
			if m[g] >= 0 {
				o := c.low[m[g]:m[g+1]]
				nth, last = ordinals[o], o == "last" || o == "final"
			}
		}
		w := ""
		for _, g := range []int{8, 10, 16, 18} {
			if m[g] >= 0 && w == "" {
				w = c.orig[m[g]:m[g+1]]
			}
		}
		if _, ok := cfg["exactly"]; !ok {
			if e := c.findNearOne(parasExactRE, []string{"paragraph"}, 30, 2); e != nil {
				cfg["exactly"] = parseNum(c.low[e[2]:e[3]])
			}
		}
		if last {
			if n, ok := cfg["exactly"].(int); ok {
				nth = n
			}
		}
		if nth > 0 && w != "" {
			cfg["nth"], cfg["first_word"] = nth, firstWordOf(w)
			if _, ok := cfg["exactly"]; !ok {
				if e := c.findNearOne(parasExactRE, []string{"paragraph"}, 30, 2); e != nil {
					cfg["exactly"] = parseNum(c.low[e[2]:e[3]])
				}
			}
			src += " " + c.orig[m[0]:m[1]]
		}
	}
	if len(cfg) > 0 {
		c.add("paragraphs", cfg, src)
	}
}

func firstWordOf(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return s
	}
	return strings.Trim(f[0], ".,;:!?\"'")
}

var optItemRE = regexp.MustCompile(`["“”']([^"“”'\n]{2,80})["“”']`)

// optionsRule: "answer with one of the following options: ..." followed by
// quoted options or one option per line.
func optionsRule(c *compiler) {
	i := strings.Index(c.low, "one of the following")
	if i < 0 {
		i = strings.Index(c.low, "choose from the following")
	}
	if i < 0 {
		return
	}
	rest := c.orig[i:min(len(c.orig), i+400)]
	if j := strings.IndexAny(rest, ":("); j >= 0 {
		rest = rest[j+1:]
	}
	var opts []string
	for _, q := range optItemRE.FindAllStringSubmatch(rest, -1) {
		if strings.TrimSpace(q[1]) != "," {
			opts = append(opts, q[1])
		}
	}
	if len(opts) < 2 {
		opts = opts[:0]
		for _, l := range strings.Split(rest, "\n") {
			l = strings.TrimSpace(strings.TrimLeft(l, "-*• "))
			if l == "" {
				if len(opts) > 0 {
					break
				}
				continue
			}
			if len(l) > 80 {
				break
			}
			opts = append(opts, l)
		}
	}
	if len(opts) >= 2 {
		c.add("options", map[string]any{"any_of": anyList(opts)}, c.orig[i:min(len(c.orig), i+40)])
	}
}

func anyList(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// merge combines checks of the same name whose configurations do not
// collide (two "length" bounds become one), keeping the first of a clash.
func merge(cs []Check) []Check {
	var out []Check
	seen := map[string]bool{}
	for _, c := range cs {
		key := c.Name + fmt.Sprint(c.Config)
		if seen[key] {
			continue // the same instruction matched twice
		}
		seen[key] = true
		merged := false
		if c.Name == "length" || c.Name == "banned" {
			for i := range out {
				if out[i].Name != c.Name {
					continue
				}
				ok := true
				for k := range c.Config {
					if _, clash := out[i].Config[k]; clash && c.Name == "length" {
						ok = false
					}
				}
				if !ok {
					continue
				}
				for k, v := range c.Config {
					if old, has := out[i].Config[k]; has {
						out[i].Config[k] = append(append([]any{}, old.([]any)...), v.([]any)...)
					} else {
						out[i].Config[k] = v
					}
				}
				out[i].Source += "; " + c.Source
				merged = true
				break
			}
		}
		if !merged {
			// a copy, so merging into it never touches a cached check
			cfg := make(map[string]any, len(c.Config))
			for k, v := range c.Config {
				cfg[k] = v
			}
			c.Config = cfg
			out = append(out, c)
		}
	}
	return out
}
