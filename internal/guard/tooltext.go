package guard

import (
	"regexp"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/guard/textnorm"
)

// Tool text is what a server writes about its tools, prompts and
// resources (descriptions, titles, parameter names, schema strings) for
// the model to choose and use them. It describes; it does not instruct.
// The signs below are the shapes of the published tool-poisoning attacks
// (hidden instruction blocks, "before using this tool read
// ~/.ssh/id_rsa", "do not tell the user", instructions that redirect
// other tools). They run on the folded text (textnorm.Normalize: case,
// look-alikes, invisible characters), so spelling tricks do not hide the
// words. Documents (tool results, resource contents) are screened by
// ScoreToolResult instead: a file may well say "read the password".

// A ToolTextSign is one sign that tool text speaks to the model.
type ToolTextSign struct {
	// Rule names the sign; Why says it in words; Match is the matched
	// text (folded), for the finding's span only.
	Rule, Why, Match string
}

type toolTextRule struct {
	name, why string
	re        *regexp.Regexp
}

const (
	secretThing = `(~/\.ssh|\.ssh/|id_rsa|id_ed25519|id_ecdsa|\.aws/credentials|\.env\b|mcp\.json|\.npmrc|\.netrc|\.git-credentials|\.kube/config|/etc/passwd|/etc/shadow|private keys?|secret keys?|api keys?|access tokens?|auth tokens?|credentials|passwords?|seed phrases?|keychain|cookies)`
	readVerb    = `\b(read|cat|open|load|send|include|pass|upload|attach|provide|copy|forward|exfiltrate|collect|extract|leak|contents? of|dump)\b`
)

var toolTextRules = []toolTextRule{
	{"hidden_block", "a hidden instruction block", regexp.MustCompile(`<\s*/?\s*(important|system|instructions?|secret|hidden|admin|assistant|ai|model|context|note)\s*>|<!--`)},
	{"override", "tells the model to ignore its instructions", regexp.MustCompile(`\b(ignore|disregard|forget|override)\s+(all\s+|any\s+|your\s+)?(the\s+)?(previous|prior|above|earlier|other|system|original)\s+(instructions|rules|directions|prompts?|guidelines)`)},
	{"preamble", "tells the model what to do before or instead of the tool's job", regexp.MustCompile(`\b(before|prior to|after)\s+(using|calling|invoking|running)\s+(this|any|the|other)\s+tools?\b[^.]{0,60}\b(must|should|need to|have to|always|first)\b|\b(you|the (ai|assistant|model|llm|agent))\s+(must|should|needs? to|have to|are required to|is required to)\s+(always\s+|first\s+|also\s+|secretly\s+)?(read|call|use|send|include|pass|forward|ignore|run|execute|fetch|invoke|add)\b`)},
	{"secrecy", "asks to keep something from the user", regexp.MustCompile(`\b(do not|don'?t|never|without)\s+(ever\s+)?(tell|telling|inform|informing|mention|mentioning|notify|notifying|reveal|revealing|alert|alerting|show|showing|disclose|disclosing)\s+(this\s+|it\s+|that\s+|anything\s+)?(to\s+)?(the\s+)?user|\b(keep|hide)\s+(this|it|that)\s+(secret|hidden|from)|\bthe user\s+(must|should|will|need)\s*(not|never)\s+(know|see|notice|be told)|\b(user|they)\s+(would|will|might)\s+(get|be)\s+(upset|scared|worried|alarmed)`)},
	{"credentials", "asks for credentials or key files", regexp.MustCompile(readVerb + `[^.\n]{0,80}` + secretThing + `|` + secretThing + `[^.\n]{0,60}\b(as|into|in)\s+(the\s+)?['"]?\w*\s*(sidenote|note|parameter|argument|field|comment)`)},
	{"shadowing", "redirects what other tools do", regexp.MustCompile(`\b(all|any|every)\s+(emails?|messages?|requests?|calls?|payments?|transfers?)\s+(must|should|shall)\s+(always\s+|also\s+)?(be\s+)?(sent|forwarded|redirected|cc'?d|bcc'?d|copied|routed)\s+to\b|\bwhen\s+(the\s+user|you)\s+(calls?|uses?|invokes?)\s+(the\s+)?\S+\s+tool\b[^.]{0,80}\b(must|should|always|also|instead)\b`)},
}

// ToolTextSigns returns the signs that text, written about a tool, a
// prompt or a resource, instructs the model instead.
func ToolTextSigns(text string) []ToolTextSign {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	folded := textnorm.Normalize(text)
	lower := strings.ToLower(text) // markup that folding may have reshaped
	var out []ToolTextSign
	for _, r := range toolTextRules {
		m := r.re.FindString(folded)
		if m == "" {
			m = r.re.FindString(lower)
		}
		if m != "" {
			out = append(out, ToolTextSign{Rule: r.name, Why: r.why, Match: clip(m)})
		}
	}
	return out
}

// secretAsk finds a request for a secret in a form's wording: a field
// or message that names a password, key, token or the like.
var secretAsk = regexp.MustCompile(`\b(passwords?|passphrases?|passcodes?|api[ _-]?keys?|secret[ _-]?keys?|private[ _-]?keys?|access[ _-]?tokens?|auth[ _-]?tokens?|bearer|tokens?|credentials?|ssh[ _-]?keys?|id_rsa|seed[ _-]?phrases?|mnemonic|recovery[ _-]?(codes?|phrases?)|credit[ _-]?card|card[ _-]?numbers?|cvv|cvc|social security|ssn|2fa|one[ _-]?time[ _-]?(codes?|passwords?))\b`)

// AsksForSecret reports whether text (a form's message, a field's name,
// title or description) asks the user for a secret or credential, and
// the words that do.
func AsksForSecret(text string) (string, bool) {
	folded := textnorm.Normalize(strings.NewReplacer("_", " ", "-", " ").Replace(splitCamel(text)))
	if m := secretAsk.FindString(folded); m != "" {
		return m, true
	}
	return "", false
}

// splitCamel puts a space before each upper-case letter that follows a
// lower-case one ("apiKey" -> "api Key"), so field names read as words.
func splitCamel(s string) string {
	var b strings.Builder
	prevLower := false
	for _, r := range s {
		isUpper := r >= 'A' && r <= 'Z'
		if isUpper && prevLower {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
		prevLower = r >= 'a' && r <= 'z'
	}
	return b.String()
}

// Words turns an identifier (a parameter or tool name) into the words it
// spells: "ignorePrevious_instructions-now" -> "ignore Previous
// instructions now", for screens that read words.
func Words(name string) string {
	return strings.NewReplacer("_", " ", "-", " ", ".", " ", "/", " ").Replace(splitCamel(name))
}
