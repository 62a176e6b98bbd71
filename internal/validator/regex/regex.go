// Package regex is the regex check: deny patterns that must not appear in
// the output and require patterns that must, with named presets (url,
// email, path, ipv4, ipv6, uuid, code_fence). Patterns are RE2 (Go
// regexp): linear time, no backtracking blow-ups.
//
// Matches that span chunk boundaries are found: each rule keeps the tail
// of the output where a match could still be in progress and re-scans it
// with the next chunk. That tail is what the check holds back from
// release, and it is kept small: a pattern that cannot match whitespace
// holds back only the current word, a pattern with a literal prefix only
// from the last occurrence of that prefix, and no pattern more than
// max_match_bytes.
package regex

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sort"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Name is the registry name of the check.
const Name = "regex"

// Rule is one pattern.
type Rule struct {
	// Pattern is an RE2 regular expression.
	Pattern string `yaml:"pattern" json:"pattern"`
	// Name labels the rule in findings (defaults to the pattern).
	Name string `yaml:"name" json:"name"`
	// Reason overrides the reason code of this rule's findings.
	Reason validator.Reason `yaml:"reason" json:"reason"`
}

// Config configures regex.
type Config struct {
	Deny           []Rule   `yaml:"deny" json:"deny"`
	Require        []Rule   `yaml:"require" json:"require"`
	DenyPresets    []string `yaml:"deny_presets" json:"deny_presets"`
	RequirePresets []string `yaml:"require_presets" json:"require_presets"`
	// Reason is the reason code of deny findings (default regex_mismatch;
	// banned_content for banned-term style rules).
	Reason validator.Reason `yaml:"reason" json:"reason"`
	// MaxMatchBytes bounds how long a match may be and so how much text a
	// rule may hold back (default 256).
	MaxMatchBytes int `yaml:"max_match_bytes" json:"max_match_bytes"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() *Config {
	return &Config{Reason: validator.ReasonRegexMismatch, MaxMatchBytes: 256}
}

// Presets are named patterns usable as deny or require rules.
var Presets = map[string]string{
	// http(s)/ftp URLs and bare www. hosts.
	"url": `(?i)\b(?:https?|ftp)://[^\s<>"'\x60]+|\bwww\.[a-z0-9-]+(?:\.[a-z0-9-]+)+[^\s<>"'\x60]*`,
	// e-mail addresses with a dotted domain and a TLD of 2+ letters.
	"email": `(?i)\b[a-z0-9][a-z0-9._%+-]*@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b`,
	// Absolute or home-relative Unix paths with two or more components,
	// and Windows drive paths.
	"path": `(?:\B|~)(?:/[\w.@+-]+){2,}/?|\b[A-Za-z]:\\[^\s\\/:*?"<>|]+(?:\\[^\s\\/:*?"<>|]+)*`,
	// Dotted-quad IPv4 addresses (each octet 0-255). A four-part version
	// number such as 3.11.4.2 is also a valid dotted quad and matches.
	"ipv4": `\b(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\b`,
	// IPv6 addresses: the full eight groups, or a "::" form with at least
	// one digit (so C++ scopes such as std::vector or a::b do not match;
	// no embedded IPv4).
	"ipv6": ipv6,
	// RFC 4122-style UUIDs.
	"uuid": `(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`,
	// A markdown code fence.
	"code_fence": "```",
}

// ipv6 is built from its parts: H is a group, D a group with a digit.
var ipv6 = func() string {
	h := `[0-9a-f]{1,4}`
	d := `[0-9a-f]{0,3}[0-9][0-9a-f]{0,3}`
	full := `\b(?:` + h + `:){7}` + h + `\b`
	digitAfter := `(?:\b(?:` + h + `:){0,6}` + h + `)?::(?:` + h + `:){0,6}` + d + `\b`
	digitBefore := `\b(?:` + h + `:){0,6}` + d + `(?::` + h + `){0,6}::(?:` + h + `(?::` + h + `){0,6}\b)?`
	return `(?i)` + full + `|` + digitAfter + `|` + digitBefore
}()

const doc = `Deny rules fail the output at every match (reason regex_mismatch, or
the configured reason such as banned_content); require rules fail it at
the end when they never matched (a zero-width finding at the end of the
output). Rules are RE2 patterns (Go regexp syntax) or presets: ` + "url, email, path, ipv4, ipv6, uuid, code_fence" + `.

Matches that span chunks are found by re-scanning the tail of the output
where a match may still be in progress. A match is reported once a byte
after it has arrived (or at the end), so greedy patterns are not cut at
a chunk boundary. The tail is held back from release: for a pattern that
cannot match whitespace only the current word, for a pattern with a
literal prefix only from the last occurrence of the prefix, and never
more than max_match_bytes (default 256), which also bounds how long a
match can be. Deny findings never start before the released point.`

// Register adds the check to r.
func Register(r *validator.Registry) {
	r.Register(validator.Spec{
		Name:    Name,
		Summary: "deny / require RE2 patterns and presets (url, email, path, ...), across chunk boundaries",
		Doc:     doc,
		Reasons: []validator.Reason{validator.ReasonRegexMismatch, validator.ReasonBannedContent},
		Example: `deny:
  - pattern: '(?i)\bas an ai language model\b'
    name: ai_disclaimer
require:
  - pattern: '(?m)^Answer:'
    name: answer_line
deny_presets: [url, email]
max_match_bytes: 256
`,
		Config: func() any { return DefaultConfig() },
		New: func(cfg any, req *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*Config)
			if c == nil {
				c = DefaultConfig()
			}
			set, err := Compile(c)
			if err != nil {
				return nil, err
			}
			if set.Empty() {
				return nil, nil
			}
			return set.New(), nil
		},
		// A call's arguments are judged by the deny rules only: a
		// required pattern is about the answer's text.
		Arguments: func(cfg any, _ *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*Config)
			if c == nil || len(c.Deny) == 0 && len(c.DenyPresets) == 0 {
				return nil, nil
			}
			d := *c
			d.Require, d.RequirePresets = nil, nil
			set, err := Compile(&d)
			if err != nil || set.Empty() {
				return nil, err
			}
			return set.New(), nil
		},
	})
}

// rule is a compiled rule.
type rule struct {
	name    string
	re      *regexp.Regexp
	reason  validator.Reason
	require bool
	// noSpace: the pattern cannot match a whitespace byte, so a match in
	// progress starts after the last whitespace.
	noSpace bool
	// prefix is the pattern's literal prefix ("" if none).
	prefix string
	// maxLen is the longest match in bytes, or -1 when unbounded.
	maxLen int
	// pre skips the regexp on segments that cannot contain a match.
	pre *prefilter
	// after finds the leftmost match that starts after the first byte of
	// its input (group 1), with that byte as context for \b and ^.
	after *regexp.Regexp
}

// Set is a compiled configuration, shared by the validators of many
// attempts (it is immutable).
type Set struct {
	rules []rule
	max   int
}

// Empty reports whether the set has no rules.
func (s *Set) Empty() bool { return len(s.rules) == 0 }

// Compile checks and compiles a configuration.
func Compile(c *Config) (*Set, error) {
	max := c.MaxMatchBytes
	if max == 0 {
		max = 256
	}
	if max < 1 || max > 1<<16 {
		return nil, fmt.Errorf("regex: max_match_bytes %d out of range 1..65536", c.MaxMatchBytes)
	}
	reason := c.Reason
	if reason == validator.ReasonNone {
		reason = validator.ReasonRegexMismatch
	}
	if !reason.Valid() {
		return nil, fmt.Errorf("regex: unknown reason %q", reason)
	}
	s := &Set{max: max}
	add := func(kind string, i int, r Rule, require bool) error {
		name := r.Name
		if name == "" {
			name = r.Pattern
		}
		rs := r.Reason
		if rs == validator.ReasonNone {
			rs = reason
			if require {
				rs = validator.ReasonRegexMismatch
			}
		}
		if !rs.Valid() {
			return fmt.Errorf("regex: %s[%d] %q: unknown reason %q", kind, i, name, rs)
		}
		if r.Pattern == "" {
			return fmt.Errorf("regex: %s[%d]: empty pattern", kind, i)
		}
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return fmt.Errorf("regex: %s[%d] %q: %w", kind, i, name, err)
		}
		parsed, err := syntax.Parse(r.Pattern, syntax.Perl)
		if err != nil {
			return fmt.Errorf("regex: %s[%d] %q: %w", kind, i, name, err)
		}
		prefix, _ := re.LiteralPrefix()
		simple := parsed.Simplify()
		after, err := regexp.Compile(`^(?s:.)(?s:.)*?(` + r.Pattern + `)`)
		if err != nil {
			return fmt.Errorf("regex: %s[%d] %q: %w", kind, i, name, err)
		}
		s.rules = append(s.rules, rule{
			name: name, re: re, reason: rs, require: require,
			noSpace: !canMatchSpace(simple), prefix: prefix, maxLen: maxLen(simple), after: after,
			pre: newPrefilter(simple),
		})
		return nil
	}
	for i, r := range c.Deny {
		if err := add("deny", i, r, false); err != nil {
			return nil, err
		}
	}
	for i, r := range c.Require {
		if err := add("require", i, r, true); err != nil {
			return nil, err
		}
	}
	for i, p := range c.DenyPresets {
		pat, ok := Presets[p]
		if !ok {
			return nil, fmt.Errorf("regex: deny_presets[%d]: unknown preset %q (have %s)", i, p, presetNames())
		}
		if err := add("deny_presets", i, Rule{Pattern: pat, Name: p}, false); err != nil {
			return nil, err
		}
	}
	for i, p := range c.RequirePresets {
		pat, ok := Presets[p]
		if !ok {
			return nil, fmt.Errorf("regex: require_presets[%d]: unknown preset %q (have %s)", i, p, presetNames())
		}
		if err := add("require_presets", i, Rule{Pattern: pat, Name: p}, true); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func presetNames() string {
	var names []string
	for n := range Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprint(names)
}

// spaces are the bytes RE2's \s matches; a pattern that cannot consume
// any of them cannot run across a space.
var spaces = []rune{' ', '\t', '\n', '\r', '\f'}

func isSpaceRune(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f'
}

// canMatchSpace reports whether the pattern can consume a whitespace byte.
func canMatchSpace(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if isSpaceRune(r) {
				return true
			}
		}
		return false
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			for _, sp := range spaces {
				if lo <= sp && sp <= hi {
					return true
				}
			}
		}
		return false
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return true
	}
	for _, sub := range re.Sub {
		if canMatchSpace(sub) {
			return true
		}
	}
	return false
}

// maxLen returns the longest match of the pattern in bytes, or -1 when it
// is unbounded (or too large to matter).
func maxLen(re *syntax.Regexp) int {
	const huge = 1 << 20
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpNoMatch:
		return 0
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return len(re.Rune) * utf8.UTFMax
		}
		n := 0
		for _, r := range re.Rune {
			n += utf8.RuneLen(r)
		}
		return n
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return 0
		}
		return utf8.RuneLen(min(re.Rune[len(re.Rune)-1], utf8.MaxRune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest:
		return maxLen(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		return -1
	case syntax.OpRepeat:
		if re.Max < 0 {
			return -1
		}
		n := maxLen(re.Sub[0])
		if n < 0 || n*re.Max > huge {
			return -1
		}
		return n * re.Max
	case syntax.OpConcat, syntax.OpAlternate:
		total := 0
		for _, sub := range re.Sub {
			n := maxLen(sub)
			if n < 0 {
				return -1
			}
			if re.Op == syntax.OpConcat {
				total += n
			} else {
				total = max(total, n)
			}
		}
		if total > huge {
			return -1
		}
		return total
	}
	return -1
}
