package leak

import (
	"math"
	"regexp"
	"strings"
)

// The credential detectors. Their shapes follow the public token formats
// (the same ones gitleaks-style rule sets describe); the patterns below
// are written for this package, RE2 only, and are applied to one word
// (a run of non-space text) or one line at a time.

// wordRule recognises a credential that is a single word.
type wordRule struct {
	name    string
	prefix  string // a cheap literal prefilter (case-sensitive)
	re      *regexp.Regexp
	entropy float64 // minimum Shannon entropy of the match, bits per char
}

var wordRules = []wordRule{
	{"AWS access key ID", "A", regexp.MustCompile(`\b((?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b`), 2.5},
	{"GitHub token", "gh", regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{36,255})\b`), 3.0},
	{"GitHub fine-grained token", "github_pat_", regexp.MustCompile(`\b(github_pat_[A-Za-z0-9_]{60,255})\b`), 3.0},
	{"Slack token", "xox", regexp.MustCompile(`\b(xox[abposr]-[A-Za-z0-9-]{10,250})\b`), 3.0},
	{"Stripe live key", "_live_", regexp.MustCompile(`\b((?:sk|rk)_live_[A-Za-z0-9]{20,247})\b`), 3.0},
	{"OpenAI-style API key", "sk-", regexp.MustCompile(`(?:^|[^A-Za-z0-9_-])(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,200})`), 3.5},
	{"Anthropic API key", "sk-ant-", regexp.MustCompile(`(sk-ant-[A-Za-z0-9_-]{30,200})`), 3.5},
	{"Google API key", "AIza", regexp.MustCompile(`\b(AIza[0-9A-Za-z_-]{35})\b`), 3.0},
	{"JSON Web Token", "eyJ", regexp.MustCompile(`\b(eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})`), 3.5},
	{"Hugging Face token", "hf_", regexp.MustCompile(`\b(hf_[A-Za-z0-9]{34,40})\b`), 3.0},
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

// entropy returns the Shannon entropy of s in bits per byte.
func entropy(s string) float64 {
	if s == "" {
		return 0
	}
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
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
			if placeholder(v) || entropy(v) < r.entropy {
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
			if r.minLen > 0 && (placeholder(v) || entropy(v) < r.entropy || len(v) < r.minLen) {
				continue
			}
			out = append(out, credMatch{m[2], m[3], r.name})
		}
	}
	return out
}
