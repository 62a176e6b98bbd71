// Package secretrules knows credentials by what they are: it carries the
// default rule set of gitleaks (config/gitleaks.toml, MIT licence, notice in
// LICENSE.gitleaks, taken from gitleaks v8.30.0-27-gb58d3f10) as embedded
// data and applies it the way gitleaks does: a keyword prefilter picks the
// rules worth running, each rule's RE2 regex finds candidates, the secret
// is the rule's secret group (or its first non-empty group), a rule's
// minimum Shannon entropy must be exceeded, and the global and per-rule
// allow-lists (documented example keys such as AKIAIOSFODNN7EXAMPLE,
// template placeholders, stop words) drop what they name, and a generic
// rule's finding gives way to a specific rule's that holds its secret.
//
// The rules are used as data rather than through the gitleaks Go module:
// the module's detect and config packages pull in viper, lipgloss, zerolog,
// archive readers and a second Aho-Corasick library, none of which a
// proxy needs. The TOML is read with github.com/pelletier/go-toml/v2 (no
// dependencies of its own). Rules that only judge a file path, and the
// path and commit parts of allow-lists, do not apply to model output and
// are left out.
//
// The keyword prefilter is a dense Aho-Corasick automaton over lower-cased
// bytes with the bytes no keyword holds folded into one class, written
// here so that streaming a byte costs one table load and allocates
// nothing (Stream, stream.go).
package secretrules

import (
	_ "embed"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/pelletier/go-toml/v2"
)

//go:embed gitleaks.toml
var gitleaksTOML []byte

// documented are example keys that vendors print in their own
// documentation, on top of the ones gitleaks' allow-lists already name
// (AKIAIOSFODNN7EXAMPLE and the like): finding them in an answer is
// quoting the docs, not leaking.
var documented = map[string]bool{
	"sk_test_4ec39hqlyjwdarjtt1zdp7dc":         true, // Stripe API reference
	"pk_test_tyoomqauvdedq54nitphi7jx":         true, // Stripe API reference
	"wjalrxutnfemi/k7mdeng/bpxrficyexamplekey": true, // AWS documentation
	"akiaiosfodnn7example":                     true, // AWS documentation
}

// isDocumented reports whether secret is one of the documented example
// keys, in any case.
func isDocumented(secret string) bool {
	for k := range documented {
		if len(k) == len(secret) && strings.EqualFold(k, secret) {
			return true
		}
	}
	return false
}

// Match is one credential found in a text: the rule that found it and the
// byte span of the secret itself.
type Match struct {
	Rule       string
	Start, End int
}

// Rule is one compiled rule.
type Rule struct {
	ID          string
	re          *regexp.Regexp
	entropy     float64
	secretGroup int
	allow       []allowList
	// For the stream's cheap tests (stream.go): the shortest match, how
	// far before its keyword a match may begin, and whether the match
	// needs an assignment operator after the keyword.
	minLen    int
	minSecret int // the shortest secret (the group reported)
	// minDistinct is how many different bytes a secret needs to pass
	// the entropy test: entropy never exceeds log2 of that count.
	minDistinct int
	lookback    int
	// reach is how far after its keyword the secret may begin.
	reach  int
	assign bool
	// anchored is the rule's regex without the context it reads before
	// its keyword and anchored at the keyword, for the rules whose regex
	// opens with that context (contextPrefix): gitleaks' generic and
	// semi-generic rules. The stream runs it at each of the rule's
	// keywords, where a full regex would search the window from every
	// byte; see stream.go. keywords are the rule's, lower-cased.
	anchored *regexp.Regexp
	keywords []string
	// inSecret: every secret of the rule holds one of its keywords, so a
	// keyword that ended before a word cannot wake the rule for it.
	inSecret bool
	// need are strings (lower case) one of which every match holds, when
	// a keyword alone does not imply one: the rule is not run on an ASCII
	// window that holds none. jwt wakes on "ey" in every "KEY" but needs
	// ".ey".
	need []string
	// generic rules give way to a specific rule that found the same
	// secret, as gitleaks reports them.
	generic bool
	// atKeyword is the regex anchored at the start of the text, for the
	// rules whose every match is their secret and begins with one of
	// their keywords (after a word boundary, wb): the stream runs it at
	// each keyword in the word instead of searching a window (see
	// startsAtKeyword).
	atKeyword *regexp.Regexp
	wb        bool
}

// assignOp is the operator group gitleaks' context rules share.
const assignOp = `(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)`

// contextPrefix opens the rules that read up to 50 bytes before their
// keyword (and need none of them).
const contextPrefix = `[\w.-]{0,50}?`

// allowList drops a candidate: a regex over the secret (or the whole
// match, or the line), or a stop word in the secret. and: every check
// that is present must hold.
type allowList struct {
	target    string // "", "match" or "line"
	regexes   allowRegexes
	stopwords []string // lower-cased
	stop      automaton
	and       bool
}

// Set is a compiled rule set with its keyword automaton. It is safe for
// concurrent use.
type Set struct {
	rules  []Rule
	global []allowList
	ac     automaton
	// outReach is, for each output of the automaton, how far after the
	// keyword the secret of a rule it wakes may begin; maxReach is the
	// largest.
	outReach []int
	maxReach int
	// always are the rules without keywords (run on every text).
	always bits
	// inSecret are the rules whose secret always holds a keyword.
	inSecret bits
}

type tomlAllow struct {
	Condition   string   `toml:"condition"`
	RegexTarget string   `toml:"regexTarget"`
	Regexes     []string `toml:"regexes"`
	StopWords   []string `toml:"stopwords"`
	Paths       []string `toml:"paths"`
	Commits     []string `toml:"commits"`
}

type tomlRule struct {
	ID          string      `toml:"id"`
	Regex       string      `toml:"regex"`
	Path        string      `toml:"path"`
	Entropy     float64     `toml:"entropy"`
	SecretGroup int         `toml:"secretGroup"`
	Keywords    []string    `toml:"keywords"`
	Allowlists  []tomlAllow `toml:"allowlists"`
	SkipReport  bool        `toml:"skipReport"`
}

type tomlConfig struct {
	Allowlist  *tomlAllow  `toml:"allowlist"`
	Allowlists []tomlAllow `toml:"allowlists"`
	Rules      []tomlRule  `toml:"rules"`
}

var (
	defaultOnce sync.Once
	defaultSet  *Set
	defaultErr  error
)

// Default returns the embedded gitleaks rule set, compiled once. It
// panics only if the embedded data is broken, which the package's tests
// rule out.
func Default() *Set {
	defaultOnce.Do(func() { defaultSet, defaultErr = Parse(gitleaksTOML) })
	if defaultErr != nil {
		panic(fmt.Sprintf("secretrules: embedded gitleaks.toml: %v", defaultErr))
	}
	return defaultSet
}

// Parse compiles a rule set in gitleaks' TOML format.
func Parse(data []byte) (*Set, error) {
	var cfg tomlConfig
	if err := toml.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("secretrules: %w", err)
	}
	s := &Set{}
	lits := newLiterals()
	var globals []tomlAllow
	if cfg.Allowlist != nil {
		globals = append(globals, *cfg.Allowlist)
	}
	globals = append(globals, cfg.Allowlists...)
	for i, a := range globals {
		al, ok, err := compileAllow(a, lits)
		if err != nil {
			return nil, fmt.Errorf("secretrules: global allow-list %d: %w", i, err)
		}
		if ok {
			s.global = append(s.global, al)
		}
	}
	var keywords []string
	var owners []int
	for _, r := range cfg.Rules {
		if r.Regex == "" || r.Path != "" || r.SkipReport {
			continue // judges file paths, or only helps another rule
		}
		re, err := regexp.Compile(r.Regex)
		if err != nil {
			return nil, fmt.Errorf("secretrules: rule %s: %w", r.ID, err)
		}
		if r.SecretGroup > re.NumSubexp() {
			return nil, fmt.Errorf("secretrules: rule %s: secretGroup %d but %d groups", r.ID, r.SecretGroup, re.NumSubexp())
		}
		rule := Rule{ID: r.ID, re: re, entropy: r.Entropy, secretGroup: r.SecretGroup,
			minLen: minLen(r.Regex), minSecret: minSecretLen(r.Regex, r.SecretGroup), lookback: 16, reach: reach, assign: strings.Contains(r.Regex, assignOp)}
		if strings.Contains(r.Regex, ".*") {
			rule.reach = lineReach
		}
		if r.Entropy > 0 {
			rule.minDistinct = int(math.Floor(math.Exp2(r.Entropy))) + 1
		}
		if strings.HasPrefix(strings.TrimPrefix(r.Regex, "(?i)"), contextPrefix) {
			// The context before the keyword may match empty, so the
			// window can begin at the keyword: the secret group is the
			// same, and a window that fits the backtracking matcher is
			// many times faster than one that needs the NFA.
			rule.lookback = 0
		}
		lower := make([]string, len(r.Keywords))
		for j, k := range r.Keywords {
			lower[j] = strings.ToLower(k)
		}
		if a, err := anchorAtKeyword(r.Regex); err != nil {
			return nil, fmt.Errorf("secretrules: rule %s: %w", r.ID, err)
		} else if a != nil {
			if a.NumSubexp() != re.NumSubexp() {
				return nil, fmt.Errorf("secretrules: rule %s: %d groups anchored, %d in the rule", r.ID, a.NumSubexp(), re.NumSubexp())
			}
			rule.anchored = a
			// Longest first: the stream tries a hit's keywords in the
			// order they begin.
			rule.keywords = slices.Clone(lower)
			slices.SortStableFunc(rule.keywords, func(a, b string) int { return len(b) - len(a) })
		}
		tree, err := syntax.Parse(r.Regex, syntax.Perl)
		if err != nil {
			return nil, fmt.Errorf("secretrules: rule %s: %w", r.ID, err)
		}
		rule.inSecret, rule.need = literalFacts(lits, tree, r.SecretGroup, lower)
		if rule.anchored == nil {
			a, wb, err := startsAtKeyword(lits, tree, r.SecretGroup, lower)
			if err != nil {
				return nil, fmt.Errorf("secretrules: rule %s: %w", r.ID, err)
			}
			if a != nil && a.NumSubexp() == re.NumSubexp() {
				rule.atKeyword, rule.wb, rule.keywords = a, wb, lower
			}
		}
		rule.generic = strings.Contains(strings.ToLower(r.ID), "generic")
		for j, a := range r.Allowlists {
			al, ok, err := compileAllow(a, lits)
			if err != nil {
				return nil, fmt.Errorf("secretrules: rule %s allow-list %d: %w", r.ID, j, err)
			}
			if ok {
				rule.allow = append(rule.allow, al)
			}
		}
		idx := len(s.rules)
		if idx >= maxRules {
			return nil, fmt.Errorf("secretrules: more than %d rules", maxRules)
		}
		s.rules = append(s.rules, rule)
		if len(r.Keywords) == 0 {
			s.always.set(idx)
		}
		if rule.inSecret {
			s.inSecret.set(idx)
		}
		for _, k := range lower {
			keywords = append(keywords, k)
			owners = append(owners, idx)
		}
	}
	s.ac = buildAutomaton(keywords, owners)
	s.outReach = make([]int, len(s.ac.outs))
	for o, rules := range s.ac.outs {
		for w := range rules {
			for m := rules[w]; m != 0; m &= m - 1 {
				s.outReach[o] = max(s.outReach[o], s.rules[w*64+trailingZeros(m)].reach)
			}
		}
		s.maxReach = max(s.maxReach, s.outReach[o])
	}
	return s, nil
}

// anchorAtKeyword returns the regex expr without the lazy context
// repetitions it opens with ([\w.-]{0,50}?, once or twice) and anchored
// at the start of the text, or nil when expr opens otherwise. The context
// holds no group, so group numbers stay; the context may match empty, so
// every match of expr whose keyword begins at i has the same groups as
// the anchored regex's match at i.
func anchorAtKeyword(expr string) (*regexp.Regexp, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	if re.Op != syntax.OpConcat {
		return nil, nil
	}
	k := 0
	for k < len(re.Sub) {
		x := re.Sub[k]
		if x.Op != syntax.OpRepeat || x.Min != 0 || x.Max != 50 || x.Flags&syntax.NonGreedy == 0 || x.Sub[0].Op != syntax.OpCharClass {
			break
		}
		k++
	}
	if k == 0 {
		return nil, nil
	}
	sub := append([]*syntax.Regexp{{Op: syntax.OpBeginText}}, re.Sub[k:]...)
	re.Sub = sub
	a, err := regexp.Compile(re.String())
	if err != nil {
		return nil, fmt.Errorf("anchored at its keyword: %w", err)
	}
	return a, nil
}

// maxNeed bounds the strings a rule's window is searched for.
const maxNeed = 16

// literalFacts reads what a rule's regex (parsed) says about its
// keywords (lower case). inSecret: the secret the rule reports (group, or every group and
// the whole match when the first non-empty one is reported) always holds
// a keyword. need: strings one of which every match holds, nil when every
// keyword already holds one of them (the window the rule runs on always
// holds a keyword). Both come from required, which reads ASCII: the
// stream uses them only on ASCII text.
func literalFacts(l *literals, tree *syntax.Regexp, group int, keywords []string) (inSecret bool, need []string) {
	if len(keywords) == 0 {
		return false, nil
	}
	re := tree.Simplify()
	// holdsKeyword reports whether every string x requires holds a
	// keyword.
	holdsKeyword := func(x *syntax.Regexp) bool {
		set, ok := l.required(x)
		if !ok {
			return false
		}
		for _, s := range set {
			if !slices.ContainsFunc(keywords, func(k string) bool { return strings.Contains(s, k) }) {
				return false
			}
		}
		return true
	}
	var groups []*syntax.Regexp
	var walk func(*syntax.Regexp)
	walk = func(x *syntax.Regexp) {
		if x.Op == syntax.OpCapture && (group == 0 || x.Cap == group) {
			groups = append(groups, x)
		}
		for _, sub := range x.Sub {
			walk(sub)
		}
	}
	walk(re)
	if group == 0 {
		groups = append(groups, re) // no group took part: the whole match
	}
	inSecret = len(groups) > 0
	for _, g := range groups {
		inSecret = inSecret && holdsKeyword(g)
	}
	set, ok := l.required(re)
	if !ok || len(set) > maxNeed {
		return inSecret, nil
	}
	for _, k := range keywords {
		if !slices.ContainsFunc(set, func(s string) bool { return strings.Contains(k, s) }) {
			return inSecret, set
		}
	}
	return inSecret, nil
}

// startsAtKeyword returns a rule's regex (parsed as re) anchored at the
// start of the text, without the word boundary it may open with (wb),
// when every match begins with its secret (group, or the first when group
// is 0, or the whole match when there is none) and with one of keywords
// (lower case; read on ASCII text, as literalFacts); nil otherwise.
func startsAtKeyword(l *literals, re *syntax.Regexp, group int, keywords []string) (*regexp.Regexp, bool, error) {
	if re.Op != syntax.OpConcat || len(keywords) == 0 {
		return nil, false, nil
	}
	k, wb := 0, false
	if re.Sub[0].Op == syntax.OpWordBoundary {
		k, wb = 1, true
	}
	if k >= len(re.Sub) {
		return nil, false, nil
	}
	first := re.Sub[k]
	switch {
	case re.MaxCap() == 0 && group == 0:
		first = &syntax.Regexp{Op: syntax.OpConcat, Sub: re.Sub[k:]} // the secret is the match
	case first.Op != syntax.OpCapture || first.Cap != max(group, 1):
		return nil, false, nil
	}
	for _, p := range l.prefixes(first) {
		if !slices.ContainsFunc(keywords, func(kw string) bool { return strings.HasPrefix(p, kw) }) {
			return nil, false, nil
		}
	}
	anchored := &syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags, Sub: append([]*syntax.Regexp{{Op: syntax.OpBeginText}}, re.Sub[k:]...)}
	a, err := regexp.Compile(anchored.String())
	if err != nil {
		return nil, false, fmt.Errorf("anchored at its keyword: %w", err)
	}
	return a, wb, nil
}

// compileAllow compiles an allow-list; ok is false when nothing in it can
// apply to model output (it needs a file path or a commit).
func compileAllow(a tomlAllow, l *literals) (allowList, bool, error) {
	al := allowList{target: a.RegexTarget, and: strings.EqualFold(a.Condition, "AND")}
	if al.and && (len(a.Paths) > 0 || len(a.Commits) > 0) {
		return al, false, nil // a path or commit that output never has
	}
	for _, x := range a.Regexes {
		if err := al.regexes.add(x); err != nil {
			return al, false, err
		}
	}
	al.regexes.build(l)
	for _, w := range a.StopWords {
		al.stopwords = append(al.stopwords, strings.ToLower(w))
	}
	if len(al.stopwords) > 0 {
		al.stop = buildAutomaton(al.stopwords, make([]int, len(al.stopwords)))
	}
	return al, !al.regexes.empty() || len(al.stopwords) > 0, nil
}

// Rules returns the IDs of the rules in the set.
func (s *Set) Rules() []string {
	out := make([]string, len(s.rules))
	for i, r := range s.rules {
		out[i] = r.ID
	}
	return out
}

// Find returns the credentials in text, in order of Start.
func (s *Set) Find(text string, out []Match) []Match {
	var hits bits
	s.ac.scan([]byte(text), &hits)
	return s.judge(text, 0, &hits, out)
}

// IsSecret reports whether s holds a credential, and the rule that says so.
func (s *Set) IsSecret(v string) (string, bool) {
	m := s.Find(v, nil)
	if len(m) == 0 {
		return "", false
	}
	return m[0].Rule, true
}

// judge runs the rules in hits (and those without keywords) over text,
// whose first byte is at offset base, and appends what survives the
// filters: the specific rules first, then the generic ones, whose secret
// gives way to a specific rule's that holds it, as gitleaks reports them.
func (s *Set) judge(text string, base int, hits *bits, out []Match) []Match {
	first := len(out)
	var found []int
	for _, generic := range []bool{false, true} {
		if generic {
			for _, m := range out[first:] {
				found = append(found, m.Start, m.End)
			}
		}
		for w := range hits {
			for m := hits[w] | s.always[w]; m != 0; m &= m - 1 {
				i := w*64 + trailingZeros(m)
				if s.rules[i].generic == generic {
					out = s.rules[i].find(s, text, base, found, out)
				}
			}
		}
	}
	slices.SortStableFunc(out[first:], func(a, b Match) int { return a.Start - b.Start })
	return out
}

// find appends the rule's matches in text (at offset base); found are
// spans, start and end, whose secrets a match gives way to.
func (r *Rule) find(s *Set, text string, base int, found []int, out []Match) []Match {
	for _, loc := range r.re.FindAllStringSubmatchIndex(text, -1) {
		out = r.judge(s, text, base, loc, loc[0], found, out)
	}
	return out
}

// judge takes one match of the rule in text (loc as the regexp package
// gives it; the match text begins at ms, which an anchored match moves
// back over its context), picks the secret, gives way when the secret
// lies inside one of the found spans, applies the entropy test and the
// allow-lists, and appends what survives.
func (r *Rule) judge(s *Set, text string, base int, loc []int, ms int, found []int, out []Match) []Match {
	ms, me := trimNewlines(text, ms, loc[1])
	ss, se := r.secretSpan(loc, ms, me)
	if ss < 0 || se <= ss {
		return out
	}
	for i := 0; i+1 < len(found); i += 2 {
		if found[i] <= base+ss && base+se <= found[i+1] {
			return out
		}
	}
	secret := text[ss:se]
	if r.entropy != 0 && Entropy(secret) <= r.entropy {
		return out
	}
	if isDocumented(secret) {
		return out
	}
	line := lineAround(text, ms, me)
	if allowed(s.global, secret, text[ms:me], line) || allowed(r.allow, secret, text[ms:me], line) {
		return out
	}
	return append(out, Match{Rule: r.ID, Start: base + ss, End: base + se})
}

// secretSpan is the span of the secret in a match that spans ms..me:
// the rule's secret group (-1 when it did not take part), or its first
// non-empty group, or the whole match.
func (r *Rule) secretSpan(loc []int, ms, me int) (int, int) {
	if r.secretGroup > 0 {
		return loc[2*r.secretGroup], loc[2*r.secretGroup+1]
	}
	for g := 1; 2*g+1 < len(loc); g++ {
		if loc[2*g] >= 0 && loc[2*g+1] > loc[2*g] {
			return loc[2*g], loc[2*g+1]
		}
	}
	return ms, me
}

// trimNewlines narrows ms..me to drop the newlines at either end, as
// gitleaks does before it reads the groups.
func trimNewlines(text string, ms, me int) (int, int) {
	for ms < me && text[ms] == '\n' {
		ms++
	}
	for me > ms && text[me-1] == '\n' {
		me--
	}
	return ms, me
}

func lineAround(text string, s, e int) string {
	a := strings.LastIndexByte(text[:s], '\n') + 1
	b := strings.IndexByte(text[e:], '\n')
	if b < 0 {
		return text[a:]
	}
	return text[a : e+b]
}

func allowed(lists []allowList, secret, match, line string) bool {
	for i := range lists {
		a := &lists[i]
		target := secret
		switch a.target {
		case "match":
			target = match
		case "line":
			target = line
		}
		re := a.regexes.match(target)
		sw := false
		if len(a.stopwords) > 0 {
			var hit bits
			a.stop.scan(unsafe.Slice(unsafe.StringData(secret), len(secret)), &hit)
			sw = !hit.empty()
		}
		if a.and {
			if (a.regexes.empty() || re) && (len(a.stopwords) == 0 || sw) {
				return true
			}
		} else if re || sw {
			return true
		}
	}
	return false
}

// Entropy is the Shannon entropy of s in bits per byte, as gitleaks
// computes it.
func Entropy(s string) float64 {
	if s == "" {
		return 0
	}
	var counts [256]int32
	var seen [256]byte // the distinct bytes, in order of first use
	k := 0
	for i := 0; i < len(s); i++ {
		if counts[s[i]] == 0 {
			seen[k] = s[i]
			k++
		}
		counts[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range seen[:k] {
		p := float64(counts[c]) / n
		h -= p * math.Log2(p)
	}
	return h
}

// minLen is the fewest bytes a match of the regex can have (0 when it
// cannot be told).
func minLen(expr string) int {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return 0
	}
	return minBytes(re.Simplify())
}

// minSecretLen is the fewest bytes the reported group can have: group
// n, or the first group, or the whole match when there is none. The first
// group is a lower bound for "first non-empty group" too, as its
// alternatives' lengths are each counted.
func minSecretLen(expr string, n int) int {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return 0
	}
	re = re.Simplify()
	if n == 0 {
		n = 1
	}
	var found *syntax.Regexp
	var walk func(*syntax.Regexp)
	walk = func(x *syntax.Regexp) {
		if found != nil {
			return
		}
		if x.Op == syntax.OpCapture && x.Cap == n {
			found = x
			return
		}
		for _, s := range x.Sub {
			walk(s)
		}
	}
	walk(re)
	if found == nil {
		return minBytes(re)
	}
	if n == 1 && re.MaxCap() > 1 {
		// "the first non-empty group": the shortest of all groups.
		m := minBytes(found)
		var all func(*syntax.Regexp)
		all = func(x *syntax.Regexp) {
			if x.Op == syntax.OpCapture {
				m = min(m, minBytes(x))
			}
			for _, s := range x.Sub {
				all(s)
			}
		}
		all(re)
		return max(m, 1)
	}
	return minBytes(found)
}

func minBytes(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			n += max(1, len(string(r)))
		}
		return n
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture:
		return minBytes(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			n += minBytes(s)
		}
		return n
	case syntax.OpAlternate:
		n := -1
		for _, s := range re.Sub {
			if m := minBytes(s); n < 0 || m < n {
				n = m
			}
		}
		return max(n, 0)
	case syntax.OpRepeat:
		return re.Min * minBytes(re.Sub[0])
	case syntax.OpPlus:
		return minBytes(re.Sub[0])
	}
	return 0 // star, quest, empty-width assertions
}
