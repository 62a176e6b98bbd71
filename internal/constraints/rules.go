package constraints

import (
	"regexp"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/validator/instruct"
)

// rules run in order. Each has guard words: the rule's regular
// expressions run only when the lower-cased text contains one of them
// (and, with need, one of need too). Most prompts contain none, so the
// compiler costs a few substring scans for them.
var rules = []rule{
	{[]string{"word", "sentence", "char", "letter", "paragraph"}, nil, lengthRule},
	{[]string{"use", "using", "import", "rely", "depend", "librar", "package", "module"}, negations, libraryRule},
	{negations, []string{"word", "term", "phrase", "name", "mention", "\"", "'", "“", "‘"}, forbiddenRule},
	{[]string{"code", "explanation", "explain"}, nil, codeOnlyRule},
	{[]string{" in ", "using", " use ", "language"}, nil, languageRule},
	{[]string{"json"}, nil, jsonRule},
	{[]string{"include", "contain", "mention", "use", "incorporat", "have"}, []string{"word", "name", "term", "phrase", "\"", "“"}, includeRule},
	{[]string{"time", "once", "twice", "thrice", "capital", "caps", "exclamation", "hashtag", "question mark"}, nil, frequencyRule},
	{[]string{"end", "finish", "conclude", "last", "final"}, nil, endPhraseRule},
	{[]string{"quot"}, nil, quotedRule},
	{[]string{"case", "capital", "caps"}, nil, caseRule},
	{[]string{"comma"}, nil, commaRule},
	{[]string{"<<", "angular"}, nil, titleRule},
	{[]string{"bullet"}, nil, bulletsRule},
	{[]string{"section", "part", "chapter", "paragraph"}, nil, sectionsRule},
	{[]string{"p.s", "p. s", "postscript", "post script", "p.p.s"}, nil, postscriptRule},
	{[]string{"placeholder"}, nil, placeholdersRule},
	{[]string{"highlight", "italic"}, nil, highlightsRule},
	{[]string{"asterisk", "******"}, nil, twoResponsesRule},
	{[]string{"repeat"}, nil, repeatRule},
	{[]string{"paragraph", "***", "section", "part"}, nil, paragraphsRule},
	{[]string{"following"}, nil, optionsRule},
	{langPhraseGuards(), nil, i18nLanguageRule},
	{limitGuards, nil, i18nLimitRule},
	{codeOnlyGuards, nil, i18nCodeOnlyRule},
	{codeRequestGuards, nil, codeRequestRule},
}

var negations = []string{"not", "n't", "never", "without", "avoid", "no ", "refrain"}

// knownLibraries are package names that "do not use X" bans even without
// the word "library" next to them. Anything else needs "library",
// "package", "module" or an import context.
var knownLibraries = map[string]bool{
	"pandas": true, "numpy": true, "scipy": true, "requests": true, "matplotlib": true, "seaborn": true, "sklearn": true,
	"scikit-learn": true, "tensorflow": true, "torch": true, "pytorch": true, "keras": true, "django": true, "flask": true,
	"fastapi": true, "beautifulsoup": true, "bs4": true, "selenium": true, "lodash": true, "jquery": true, "react": true,
	"express": true, "axios": true, "moment": true, "underscore": true, "boost": true, "regex": false, "tokio": true,
	"serde": true, "openssl": true, "polars": true, "sqlalchemy": true, "opencv": true, "cv2": true, "nltk": true,
	"spacy": true, "gorm": true, "gin": true, "langchain": true, "vue": true, "angular": true, "redux": true,
}

var (
	libRE   = regexp.MustCompile(`(?:do not|don't|dont|never|without|avoid|must not|should not|cannot|can't|no need to)\s+(?:use|using|import|importing|rely on|relying on|depend on)\s+(?:the\s+|any\s+)?([a-z][a-z0-9_.\-]*(?:(?:\s*,\s*|\s+or\s+|\s+and\s+|\s*,\s*or\s+)[a-z][a-z0-9_.\-]*)*)(\s+(?:librar(?:y|ies)|packages?|modules?|crates?|libs?|dependenc(?:y|ies))\b)?`)
	noLibRE = regexp.MustCompile(`\bno\s+([a-z][a-z0-9_.\-]*)\s+(?:librar(?:y|ies)|packages?|modules?|imports?)\b`)
	listSep = regexp.MustCompile(`\s*,\s*(?:or\s+|and\s+)?|\s+or\s+|\s+and\s+`)
)

func libraryRule(c *compiler) {
	var libs []string
	srcs := []string{}
	for _, m := range c.findNear(libRE, negations, 4, 120) {
		explicit := m[4] >= 0
		for _, name := range listSep.Split(c.low[m[2]:m[3]], -1) {
			name = strings.Trim(name, ".-")
			if explicit || knownLibraries[name] {
				libs = append(libs, name)
			}
		}
		srcs = append(srcs, c.orig[m[0]:m[1]])
	}
	for _, m := range c.findNear(noLibRE, []string{"librar", "package", "module", "import"}, 40, 12) {
		libs = append(libs, c.low[m[2]:m[3]])
		srcs = append(srcs, c.orig[m[0]:m[1]])
	}
	if len(libs) > 0 {
		c.add("banned", map[string]any{"libraries": anyList(libs)}, strings.Join(srcs, "; "))
	}
}

var (
	// "do not include the keywords X, Y", "avoid the words X and Y",
	// "must not contain the word "rich"", "without using the word X".
	forbidRE  = regexp.MustCompile(`(?:do not|don't|dont|never|must not|should not|avoid|without|refrain from|not allowed to|cannot|can't|not)\s+(?:\w+\s+){0,2}?(?:use|using|include|including|say|saying|mention|mentioning|write|writing|contain|containing|have|having)\s+(?:any\s+of\s+)?(?:the\s+|these\s+|any\s+)?(?:following\s+)?(?:(?:key)?words?|terms?|phrases?|names?)?\s*:?\s*(` + listPat + `)`)
	forbid2RE = regexp.MustCompile(`(?:the\s+)?(?:key)?words?\s+(` + listPat + `)\s+(?:(?:should|must|may|can|does|do)\s*(?:not|never)|\w+n't)\s+(?:appear|be used|be included|be mentioned|be in|be part of|be present|occur|show up)`)
	forbid3RE = regexp.MustCompile(`(?:avoid|without|no)\s+(?:the\s+|these\s+|any\s+(?:of\s+the\s+)?)?(?:following\s+)?(?:key)?words?\s*:?\s*(` + listPat + `)`)
	mentionRE = regexp.MustCompile(`(?:do not|don't|dont|never|must not|should not|avoid)\s+(?:mention|mentioning|talk about|bring up|reference)\s+(?:the\s+|any\s+)?(?:(?:key)?words?\s+|terms?\s+|names?\s+)?(` + listPat + `)`)
)

const wordOrQuotList = anyQuote + `[^"'“”‘’\n]{1,60}` + anyQuote + `(?:\s*(?:, and|, or|,|or|and)\s*` + anyQuote + `[^"'“”‘’\n]{1,60}` + anyQuote + `)*|[\p{L}\d_\-]+(?:\s*(?:, and|, or|,|or|and)\s+[\p{L}\d_\-]+|,\s*[\p{L}\d_\-]+)*`

// listPat is a list of quoted items, a bracketed list, or bare words
// joined by commas, "and" and "or".
const listPat = `\[[^\]\n]{1,200}\]|` + wordOrQuotList

var quotedItemRE = regexp.MustCompile(anyQuote + `([^"'“”‘’\n]{1,60})` + anyQuote)

// stopTerms are words after "do not use" that are not terms to ban: they
// belong to other rules (commas, capital letters) or are too vague.
var stopTerms = map[string]bool{"any": true, "commas": true, "comma": true, "capital": true, "capitals": true, "uppercase": true,
	"lowercase": true, "markdown": true, "bullet": true, "bullets": true, "the": true, "a": true, "more": true, "other": true,
	"words": true, "word": true, "keyword": true, "keywords": true, "letters": true, "punctuation": true, "code": true, "it": true, "this": true, "that": true,
	"them": true, "in": true, "your": true, "to": true, "language": true, "english": true, "numbers": true, "emojis": true,
	"headers": true, "jargon": true, "technical": true, "bold": true, "lists": true, "list": true, "quotes": true, "quotation": true,
	"double": true, "single": true, "exclamation": true, "external": true, "abbreviations": true, "contractions": true,
	"and": true, "or": true, "with": true, "of": true, "for": true, "on": true, "be": true, "all": true, "explanation": true,
	"explanations": true, "comments": true, "extra": true, "additional": true, "prose": true, "text": true, "too": true, "so": true,
	"you": true, "me": true, "i": true, "we": true, "he": true, "she": true, "they": true, "is": true, "are": true, "at": true,
	"least": true, "most": true, "only": true, "once": true, "twice": true, "times": true, "should": true, "must": true,
	"anything": true, "before": true, "after": true, "else": true, "something": true, "first": true, "same": true, "response": true, "answer": true, "name": true}

// listItems splits a list into items: quoted items when there are any,
// else bare words.
func listItems(orig string) []string {
	var out []string
	if qs := quotedItemRE.FindAllStringSubmatch(orig, -1); len(qs) > 0 {
		for _, q := range qs {
			out = append(out, q[1])
		}
		return out
	}
	for _, w := range listSep.Split(strings.Trim(orig, "[]"), -1) {
		w = strings.Trim(w, " .,;:!?[]")
		if w != "" && !strings.Contains(w, " ") && !stopTerms[asciiLower(w)] {
			out = append(out, w)
		}
	}
	return out
}

func forbiddenRule(c *compiler) {
	var terms []string
	var srcs []string
	addTerm := func(t string) {
		t = strings.TrimSpace(strings.Trim(asciiLower(t), ".,;:!?"))
		if t == "" || stopTerms[t] || knownLibraries[t] {
			return
		}
		terms = append(terms, t)
	}
	for _, m := range c.findNear(forbidRE, negations, 4, 240) {
		head := c.low[m[0]:m[2]]
		list := c.orig[m[2]:m[3]]
		keyed := strings.Contains(head, "word") || strings.Contains(head, "term") || strings.Contains(head, "phrase") || strings.Contains(head, "name")
		quoted := quotedItemRE.MatchString(list) || strings.HasPrefix(list, "[")
		if !keyed && !quoted {
			continue
		}
		for _, t := range listItems(list) {
			addTerm(t)
		}
		srcs = append(srcs, c.orig[m[0]:m[1]])
	}
	for i, re := range []*regexp.Regexp{forbid2RE, forbid3RE, mentionRE} {
		kws := [][]string{{"word"}, {"avoid", "without", "no "}, {"mention", "talk about", "bring up", "reference"}}[i]
		for _, m := range c.findNear(re, kws, 60, 240) {
			for _, t := range listItems(c.orig[m[2]:m[3]]) {
				addTerm(t)
			}
			srcs = append(srcs, c.orig[m[0]:m[1]])
		}
	}
	if len(terms) > 0 {
		c.add("banned", map[string]any{"terms": anyList(dedupe(terms))}, strings.Join(srcs, "; "))
	}
}

var codeOnlyRE = regexp.MustCompile(`(?:(?:reply|respond|answer|return|output|give me|provide|write|show)\s+(?:with\s+)?(?:the\s+)?(?:only\s+(?:the\s+)?code|code only|just (?:the )?code)|only (?:output|return|reply with|respond with|give|provide|write) (?:the\s+)?code|\bcode only\b|just the code|no explanations?\b|without (?:any )?explanations?|do not (?:explain|add (?:any )?explanations?))`)

func codeOnlyRule(c *compiler) {
	if m := c.findNearOne(codeOnlyRE, []string{"code", "explanation", "explain"}, 50, 30); m != nil {
		c.add("code_only", map[string]any{}, c.orig[m[0]:m[1]])
	}
}

var (
	langRE = regexp.MustCompile(`\b(?:in|using|use)\s+(?:only\s+|entirely\s+)?(?:the\s+)?([a-z]+)\b|language:\s*([a-z]+)`)
	// a language instruction must be about the response.
	langCtxRE = regexp.MustCompile(`respon|answer|reply|write|writ|output|language|translate|speak|only`)
)

func languageRule(c *compiler) {
	for _, m := range c.findNear(langRE, c.languageWords(), 40, 24) {
		var name string
		for g := 2; g < 6; g += 2 {
			if m[g] >= 0 {
				name = c.low[m[g]:m[g+1]]
			}
		}
		if len(name) < 4 || !languageNames[name] {
			continue
		}
		// The sentence around it must speak of the response or language,
		// and not of a translation source ("from French").
		start := strings.LastIndexAny(c.low[:m[0]], ".\n!?") + 1
		end := strings.IndexAny(c.low[m[1]:], ".\n!?")
		if end < 0 {
			end = len(c.low)
		} else {
			end += m[1]
		}
		sent := c.low[start:end]
		if !langCtxRE.MatchString(sent) {
			continue
		}
		if _, ok := instruct.ParseLanguage(name); !ok {
			continue
		}
		c.add("language", map[string]any{"language": name}, c.orig[start:end])
		return
	}
}

var (
	// imperativeRE: the verb at i is an instruction when the sentence
	// starts with it or a modal precedes it.
	modalRE   = regexp.MustCompile(`(?:must|should|shall|will|need to|needs to|have to|has to|make sure(?: to| that| you)?|be sure to|ensure(?: that| you)?|please|to|also|and|then|you)\s+(?:\w+\s+)?$`)
	requestRE = regexp.MustCompile(`\b(?:write|create|give|generate|compose|draft|make|produce|answer|respond|reply|list|tell|explain|describe|provide|summari[sz]e|rewrite|your (?:response|answer|reply|output|essay|story|poem|post|email|letter))\b`)
)

// isRequest reports whether the verb at offset i reads as an instruction
// about the response: the sentence opens with it, a modal or "to"
// precedes it, or its sentence asks for something (write, give, your
// response) so that "that includes X" describes the requested output.
func (c *compiler) isRequest(i int) bool {
	start := strings.LastIndexAny(c.low[:i], ".!?\n") + 1
	before := strings.TrimSpace(c.low[start:i])
	verb := c.low[i:]
	if j := strings.IndexAny(verb, " \t\n"); j >= 0 {
		verb = verb[:j]
	}
	// a base-form verb ("include", not "includes"/"including") is an
	// imperative at the start of a sentence or after a modal.
	base := !strings.HasSuffix(verb, "s") && !strings.HasSuffix(verb, "ing")
	if base && (before == "" || modalRE.MatchString(c.low[start:i])) {
		return true
	}
	end := strings.IndexAny(c.low[i:], ".!?\n")
	if end < 0 {
		end = len(c.low)
	} else {
		end += i
	}
	return requestRE.MatchString(c.low[start:end])
}

// languageWords returns the language names that occur in the text (the
// keywords for the language rule's windows).
func (c *compiler) languageWords() []string {
	var out []string
	start := -1
	for i := 0; i <= len(c.low); i++ {
		if i < len(c.low) && c.low[i] >= 'a' && c.low[i] <= 'z' {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && languageNames[c.low[start:i]] {
			out = append(out, c.low[start:i])
		}
		start = -1
	}
	return out
}

// languageNames are the language names the rule looks for (only names
// whatlanggo can identify, checked again with ParseLanguage).
var languageNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range []string{"english", "french", "german", "spanish", "italian", "portuguese", "dutch", "russian",
		"ukrainian", "polish", "czech", "slovak", "hungarian", "romanian", "bulgarian", "serbian", "croatian", "greek",
		"turkish", "arabic", "hebrew", "persian", "farsi", "urdu", "hindi", "bengali", "marathi", "nepali", "gujarati",
		"punjabi", "tamil", "telugu", "kannada", "malayalam", "thai", "vietnamese", "indonesian", "japanese", "korean",
		"chinese", "mandarin", "swedish", "danish", "norwegian", "finnish", "estonian", "latvian", "lithuanian",
		"slovenian", "tagalog", "zulu", "afrikaans", "amharic", "yoruba", "hausa", "igbo", "azerbaijani", "uzbek", "sinhala",
		"khmer", "burmese", "georgian", "belarusian", "macedonian", "latin", "esperanto"} {
		m[n] = true
	}
	return m
}()

var jsonRE = regexp.MustCompile(`(?:(?:respond|reply|answer|output|return|format|formatted|write|give|provide|wrap)[^.\n]{0,60}\b(?:in|as|using|with)\s+(?:a\s+|an\s+|valid\s+|the\s+)*json\b|json (?:format|only|object only)\b|\bonly (?:valid )?json\b|entire (?:output|response) (?:should|must) be (?:in )?(?:valid )?json|(?:valid|raw|strict|pure) json (?:only|object)|json format)`)

func jsonRule(c *compiler) {
	if m := c.findNearOne(jsonRE, []string{"json"}, 90, 30); m != nil {
		c.add("json_syntax", map[string]any{"always": true}, c.orig[m[0]:m[1]])
	}
}

var (
	includeRE  = regexp.MustCompile(`(?:include|includes|including|contain|contains|containing|use|using|mention|mentions|mentioning|incorporate|incorporating|have)\s+(?:the\s+|these\s+|all\s+(?:of\s+)?(?:the\s+)?)?(?:following\s+)?key\s?words?\s*:?\s*(` + listPat + `)`)
	include2RE = regexp.MustCompile(`(?:include|includes|including|contain|contains|use|mention|mentions)\s+(?:the\s+(?:word|name|term|phrase)s?\s+)?(` + anyQuote + `[^"'“”‘’\n]{1,60}` + anyQuote + `(?:\s*(?:,|or|and|, and)\s*` + anyQuote + `[^"'“”‘’\n]{1,60}` + anyQuote + `)*)`)
	include3RE = regexp.MustCompile(`(?:include|includes|use|mention|mentions)\s+the\s+(?:word|name|term)\s+([\p{L}\d_\-]+)`)
)

func includeRule(c *compiler) {
	var kws []string
	var srcs []string
	for _, re := range []*regexp.Regexp{includeRE, include2RE, include3RE} {
		for _, m := range c.findNear(re, []string{"include", "contain", "mention", "use", "incorporat", "have"}, 4, 240) {
			pre := c.low[max(0, m[0]-14):m[0]]
			if strings.Contains(pre, "not ") || strings.Contains(pre, "n't ") || strings.Contains(pre, "avoid") || strings.Contains(pre, "without") || strings.Contains(pre, "never") {
				continue
			}
			if !c.isRequest(m[0]) {
				continue // "contains keyword validation": a description, not an instruction
			}
			items := listItems(c.orig[m[2]:m[3]])
			if re == include3RE {
				items = []string{c.orig[m[2]:m[3]]}
			}
			for _, w := range items {
				if !stopTerms[asciiLower(w)] {
					kws = append(kws, w)
				}
			}
			srcs = append(srcs, c.orig[m[0]:m[1]])
		}
	}
	if len(kws) > 0 {
		c.add("keywords", map[string]any{"include": anyList(dedupe(kws))}, strings.Join(srcs, "; "))
	}
}
