package mcp

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/guard/textnorm"
)

// A poisonRule is one deterministic sign that a tool's description speaks
// to the model rather than describing the tool: the shapes of the
// published tool-poisoning attacks (hidden instruction blocks, "before
// using this tool read ~/.ssh/id_rsa", "do not tell the user",
// instructions that redirect other tools). Rules run on the folded text
// (textnorm.Normalize: case, look-alikes, invisible characters), so
// spelling tricks do not hide the words.
type poisonRule struct {
	name string
	why  string
	re   *regexp.Regexp
}

const (
	secretThing = `(~/\.ssh|\.ssh/|id_rsa|id_ed25519|id_ecdsa|\.aws/credentials|\.env\b|mcp\.json|\.npmrc|\.netrc|\.git-credentials|\.kube/config|/etc/passwd|/etc/shadow|private keys?|secret keys?|api keys?|access tokens?|auth tokens?|credentials|passwords?|seed phrases?|keychain|cookies)`
	readVerb    = `\b(read|cat|open|load|send|include|pass|upload|attach|provide|copy|forward|exfiltrate|collect|extract|leak|contents? of|dump)\b`
)

var poisonRules = []poisonRule{
	{"hidden_block", "a hidden instruction block", regexp.MustCompile(`<\s*/?\s*(important|system|instructions?|secret|hidden|admin|assistant|ai|model|context|note)\s*>|<!--`)},
	{"override", "tells the model to ignore its instructions", regexp.MustCompile(`\b(ignore|disregard|forget|override)\s+(all\s+|any\s+|your\s+)?(the\s+)?(previous|prior|above|earlier|other|system|original)\s+(instructions|rules|directions|prompts?|guidelines)`)},
	{"preamble", "tells the model what to do before or instead of the tool's job", regexp.MustCompile(`\b(before|prior to|after)\s+(using|calling|invoking|running)\s+(this|any|the|other)\s+tools?\b[^.]{0,60}\b(must|should|need to|have to|always|first)\b|\b(you|the (ai|assistant|model|llm|agent))\s+(must|should|needs? to|have to|are required to|is required to)\s+(always\s+|first\s+|also\s+|secretly\s+)?(read|call|use|send|include|pass|forward|ignore|run|execute|fetch|invoke|add)\b`)},
	{"secrecy", "asks to keep something from the user", regexp.MustCompile(`\b(do not|don'?t|never|without)\s+(ever\s+)?(tell|telling|inform|informing|mention|mentioning|notify|notifying|reveal|revealing|alert|alerting|show|showing|disclose|disclosing)\s+(this\s+|it\s+|that\s+|anything\s+)?(to\s+)?(the\s+)?user|\b(keep|hide)\s+(this|it|that)\s+(secret|hidden|from)|\bthe user\s+(must|should|will|need)\s*(not|never)\s+(know|see|notice|be told)|\b(user|they)\s+(would|will|might)\s+(get|be)\s+(upset|scared|worried|alarmed)`)},
	{"credentials", "asks for credentials or key files", regexp.MustCompile(readVerb + `[^.\n]{0,80}` + secretThing + `|` + secretThing + `[^.\n]{0,60}\b(as|into|in)\s+(the\s+)?['"]?\w*\s*(sidenote|note|parameter|argument|field|comment)`)},
	{"shadowing", "redirects what other tools do", regexp.MustCompile(`\b(all|any|every)\s+(emails?|messages?|requests?|calls?|payments?|transfers?)\s+(must|should|shall)\s+(always\s+|also\s+)?(be\s+)?(sent|forwarded|redirected|cc'?d|bcc'?d|copied|routed)\s+to\b|\bwhen\s+(the\s+user|you)\s+(calls?|uses?|invokes?)\s+(the\s+)?\S+\s+tool\b[^.]{0,80}\b(must|should|always|also|instead)\b`)},
}

// invisibleRune reports characters that hide text from a person reading a
// description: Unicode tag characters, zero-width characters and
// bidirectional overrides.
func invisibleRune(r rune) bool {
	switch {
	case r >= 0xE0000 && r <= 0xE007F:
		return true
	case r >= 0x200B && r <= 0x200F, r == 0x2060, r == 0xFEFF:
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// poisonFinding is one rule that matched a tool's text.
type poisonFinding struct {
	Rule, Why, Where, Match string
}

func (f poisonFinding) String() string {
	return fmt.Sprintf("%s in %s (%s)", f.Why, f.Where, f.Rule)
}

// screenText applies the rules to one piece of a tool's text.
func screenText(where, text string) []poisonFinding {
	var out []poisonFinding
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		if invisibleRune(r) {
			out = append(out, poisonFinding{"invisible", "invisible characters that hide text", where, fmt.Sprintf("U+%04X at byte %d", r, i)})
			break
		}
		i += n
	}
	folded := textnorm.Normalize(text)
	lower := strings.ToLower(text) // markup that folding may have reshaped
	for _, r := range poisonRules {
		m := r.re.FindString(folded)
		if m == "" {
			m = r.re.FindString(lower)
		}
		if m != "" {
			out = append(out, poisonFinding{r.name, r.why, where, truncate(m, 80)})
		}
	}
	return out
}
