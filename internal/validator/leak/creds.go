package leak

import (
	"regexp"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/secretrules"
)

// The credential rules gitleaks' default set lacks. Every credential a
// token's shape gives away (cloud keys, GitHub, Slack, Stripe, OpenAI,
// Anthropic and Google keys, JWTs, Hugging Face tokens, ...) is found by
// package secretrules, the one source of those shapes; what stays here
// is what a stream of prose shows in context instead: a password in a
// URL's user information, a private-key header before its body has come,
// an AWS secret access key after the word "aws", and a quoted value
// assigned to a password-like name. The patterns are RE2, applied to one
// word (a run of non-space text) or one line at a time.

// wordRule recognises a credential that is a single word.
type wordRule struct {
	name    string
	prefix  string // a cheap literal prefilter (case-sensitive)
	re      *regexp.Regexp
	entropy float64 // minimum Shannon entropy of the match, bits per char
}

var wordRules = []wordRule{
	{"password in a URL", "://", regexp.MustCompile(`[a-z][a-z0-9+.-]*://[^/\s:@]{1,64}:([^/\s@]{6,128})@[^\s/]+`), 2.5},
}

// lineRule recognises a credential from its context on one line.
type lineRule struct {
	name    string
	re      *regexp.Regexp // group 1 is the secret
	entropy float64
	minLen  int
}

var lineRules = []lineRule{
	{"private key block", regexp.MustCompile(`(-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)`), 0, 0},
	{"AWS secret access key", regexp.MustCompile(`(?i)(?:^|[^a-z0-9])aws.{0,20}?(?:secret|sk).{0,20}?["'\s:=]{1,40}([A-Za-z0-9/+=]{40})(?:[^A-Za-z0-9/+=]|$)`), 3.5, 40},
	{"password or secret assignment", regexp.MustCompile(`(?i)(?:pass(?:word|wd|phrase)?|pwd|secret|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|client[_-]?secret|private[_-]?key|token)["']?\s*(?::=|[:=]|=>)\s*["'\x60]([^"'\x60\s]{8,200})["'\x60]`), 3.0, 8},
}

// placeholderWords mark a value as an example, not a credential.
var placeholderWords = []string{
	"example", "sample", "your", "xxxx", "****", "....", "placeholder", "changeme", "change_me", "dummy",
	"redacted", "insert", "replace", "here", "fake", "test", "todo", "secret_key", "password", "mypassword",
	"<", ">", "${", "{{", "%s", "process.env", "os.environ", "getenv", "abcdef", "123456", "...",
}

// placeholder reports whether s looks like a stand-in, not a credential:
// a documented example (AKIAIOSFODNN7EXAMPLE), template syntax, a run of
// x or *, or an explicit "your-api-key-here".
func placeholder(s string) bool {
	l := strings.ToLower(s)
	for _, w := range placeholderWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	// Four or more of the same character in a row (aaaa, 0000, ----).
	run, prev := 0, rune(-1)
	for _, r := range l {
		if r == prev {
			run++
			if run >= 4 {
				return true
			}
		} else {
			run, prev = 1, r
		}
	}
	return false
}

// credMatch is a credential found in a word or line: its byte range in
// that text and its kind.
type credMatch struct {
	start, end int
	kind       string
}

// scanWord checks one word for single-word credentials.
func scanWord(w string, out []credMatch) []credMatch {
	for i := range wordRules {
		r := &wordRules[i]
		if !strings.Contains(w, r.prefix) {
			continue
		}
		for _, m := range r.re.FindAllStringSubmatchIndex(w, -1) {
			v := w[m[2]:m[3]]
			if placeholder(v) || secretrules.Entropy(v) < r.entropy {
				continue
			}
			out = append(out, credMatch{m[2], m[3], r.name})
		}
	}
	return out
}

// scanLine checks one line for context-dependent credentials. The flags
// say which rules can apply (their cheap triggers were seen): a private
// key header, "aws", an assignment keyword before a quoted value.
func scanLine(line string, begin, aws, assign bool, out []credMatch) []credMatch {
	for i := range lineRules {
		if !(i == 0 && begin || i == 1 && aws || i == 2 && assign) {
			continue
		}
		r := &lineRules[i]
		for _, m := range r.re.FindAllStringSubmatchIndex(line, -1) {
			v := line[m[2]:m[3]]
			if r.minLen > 0 && (placeholder(v) || secretrules.Entropy(v) < r.entropy || len(v) < r.minLen) {
				continue
			}
			out = append(out, credMatch{m[2], m[3], r.name})
		}
	}
	return out
}
