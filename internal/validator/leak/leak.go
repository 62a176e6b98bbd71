// Package leak fails an output that leaks the system prompt, a secret the
// system prompt marks, or a credential.
//
//   - System prompt (system_prompt_leak): word shingles of the system
//     prompt (5 words by default; 8 missed copies with an edit every few
//     words) are looked up as the output streams; a
//     run of matching shingles that covers min_leak_tokens words, or
//     min_leak_fraction of a shorter system prompt, is a leak. Runs
//     tolerate a few changed words, punctuation and formatting. System
//     prompts shorter than min_system_tokens words are not judged, and
//     shingles made mostly of stop words ("you are a helpful assistant
//     and you") are ignored.
//   - Marked secrets (secret_leak): values the system prompt labels as
//     secret — <secret>...</secret>, lines such as "password: X",
//     "API key = X", "the code word is X" — and any credential-shaped
//     string in it must not appear in the output (ASCII case-insensitive,
//     whole word at letter/digit edges), plus the policy's extra secrets.
//   - gitleaks' default rules (secret_leak, internal/secretrules, the one
//     source of credential shapes): some two hundred formats (AWS, GitHub,
//     Slack, Stripe, OpenAI, Anthropic, Google, SendGrid, npm, Hugging
//     Face, JWTs, cloud and CI tokens...), with gitleaks' keyword
//     prefilter, entropy minimums and allow-lists of documented example
//     keys, judged as each word ends; with them on, the word in progress
//     is held until it ends.
//   - Credentials in context (secret_leak, creds.go): what gitleaks'
//     default set lacks and prose shows: a password in a URL, a private
//     key header before its body has come, an AWS secret access key after
//     the word "aws", and high-entropy quoted password/secret/token
//     assignments, with a placeholder list (xxxx, <YOUR_KEY>,
//     your-api-key-here, ****) and entropy minimums.
//   - System-prompt canaries (secret_leak, canary.go): every token of the
//     system prompt that looks like a secret by its own shape, whatever
//     words introduce it, watched for verbatim and in normalised and
//     encoded copies. Findings name the rule and a length, never the
//     secret's bytes.
//   - Markdown images (secret_leak): the URL of ![alt](URL) is also read
//     URL-decoded, by query parameter and with base64 runs decoded, for
//     marked secrets and credentials (image.go); it is held until it ends.
//
// The output is read one byte at a time and split into words (runs
// without white space, quotes, brackets or separators, none of which a
// credential shape contains) and lines, so findings do not depend on chunk boundaries.
// Settled holds back only what could still turn out to be a leak: with
// gitleaks' rules on, the word being read; with them off, only from the
// first byte where a context credential could still begin ("-----BEGIN",
// a URL's password; an ordinary word flows letter by letter, see
// prefix.go), the rest of a
// line after "-----BEGIN", a run of key characters soon after a word
// "aws", a quoted value after ':' or '=' until its closing quote (an
// assignment value, judged as soon as it closes), a partial match of a marked secret, and a
// system-prompt run under way together with the last few words if they
// open one of its shingles (and the word being read if its letters begin a
// word that opens one).
package leak

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aegis-sentinel/aegis/internal/mdimage"
	"github.com/aegis-sentinel/aegis/internal/secretrules"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Name is the registry name of the check.
const Name = "leak"

// Config is the policy section of the check.
type Config struct {
	// SystemPrompt enables the system-prompt overlap check.
	SystemPrompt bool `yaml:"system_prompt" json:"system_prompt"`
	// ShingleTokens is the shingle length in words.
	ShingleTokens int `yaml:"shingle_tokens" json:"shingle_tokens"`
	// MinSystemTokens: shorter system prompts are not judged for overlap.
	MinSystemTokens int `yaml:"min_system_tokens" json:"min_system_tokens"`
	// MinLeakTokens words of the system prompt copied in one run are a leak.
	MinLeakTokens int `yaml:"min_leak_tokens" json:"min_leak_tokens"`
	// MinLeakFraction of a short system prompt copied is a leak too.
	MinLeakFraction float64 `yaml:"min_leak_fraction" json:"min_leak_fraction"`
	// MarkedSecrets enables matching the secrets the system prompt marks.
	MarkedSecrets bool `yaml:"marked_secrets" json:"marked_secrets"`
	// Credentials enables the context credential rules gitleaks lacks
	// (creds.go: a URL's password, a private-key header, an AWS secret
	// after "aws", quoted password assignments).
	Credentials bool `yaml:"credentials" json:"credentials"`
	// Rules enables gitleaks' default credential rules (internal/secretrules).
	Rules bool `yaml:"rules" json:"rules"`
	// Canaries enables watching the system prompt's secret-looking tokens
	// (canary.go).
	Canaries bool `yaml:"canaries" json:"canaries"`
	// Secrets are extra literal values that must never appear.
	Secrets []string `yaml:"secrets" json:"secrets"`
	// Allow lists values that are never reported (known test keys).
	Allow []string `yaml:"allow" json:"allow"`
}

// DefaultConfig enables every part with the documented thresholds.
func DefaultConfig() *Config {
	return &Config{
		SystemPrompt: true, ShingleTokens: 5, MinSystemTokens: 12, MinLeakTokens: 20, MinLeakFraction: 0.5,
		MarkedSecrets: true, Credentials: true, Rules: true, Canaries: true,
	}
}

func (c *Config) validate() error {
	switch {
	case c.ShingleTokens < 3 || c.ShingleTokens > 32:
		return fmt.Errorf("leak: shingle_tokens %d out of range 3..32", c.ShingleTokens)
	case c.MinLeakTokens < c.ShingleTokens:
		return fmt.Errorf("leak: min_leak_tokens %d is below shingle_tokens %d", c.MinLeakTokens, c.ShingleTokens)
	case c.MinLeakFraction <= 0 || c.MinLeakFraction > 1:
		return fmt.Errorf("leak: min_leak_fraction %v out of range (0, 1]", c.MinLeakFraction)
	case c.MinSystemTokens < 0:
		return fmt.Errorf("leak: min_system_tokens %d is negative", c.MinSystemTokens)
	}
	for _, s := range c.Secrets {
		if len(strings.TrimSpace(s)) < minSecretLen {
			return fmt.Errorf("leak: secret %q is shorter than %d bytes", s, minSecretLen)
		}
	}
	return nil
}

// Register adds the check to r.
func Register(r *validator.Registry) {
	s := validator.Spec{
		Name:    Name,
		Summary: "fails on system-prompt leaks (shingle overlap), marked secrets and credentials",
		Doc: `System prompt: runs of 5-word shingles of the system prompt found in the output
covering min_leak_tokens words (or min_leak_fraction of a short prompt).
Marked secrets: values the system prompt labels secret (<secret>..</secret>,
"password: X", "the code word is X", credential-shaped strings) and the
policy's secrets must not appear. rules: gitleaks' default rule set (about 200
credential formats: cloud keys, tokens, JWTs...; keyword prefilter, entropy
minimums, allow-lists of documented example keys). credentials: what those rules
lack and prose shows: passwords in URLs, private key headers, AWS secret keys
after "aws", high-entropy password assignments, with placeholder and entropy
filters. canaries: every system-prompt token that looks like a secret by its shape
(letters mixed with digits or symbols, high entropy, quoted; not an ordinary fact
such as a phone number, address, date, version or hex identifier, and not a word
of the user's) must not appear verbatim, with changed case or separators, or hex-
or base64-encoded. Holds back only a word, line tail or run that could
still become a leak.`,
		Reasons: []validator.Reason{validator.ReasonSystemPromptLeak, validator.ReasonSecretLeak},
		Example: "system_prompt: true\nshingle_tokens: 5\nmin_system_tokens: 12\nmin_leak_tokens: 20\nmin_leak_fraction: 0.5\n" +
			"marked_secrets: true\ncredentials: true\nrules: true\ncanaries: true\nsecrets: [\"tiger-lily-42\"]\nallow: [\"AKIAIOSFODNN7EXAMPLE\"]\n",
		Config: func() any { return DefaultConfig() },
		New: func(cfg any, req *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*Config)
			if c == nil {
				c = DefaultConfig()
			}
			system, user := "", ""
			if req != nil {
				system, user = req.System(), userText(req)
			}
			return NewFor(*c, system, user)
		},
	}
	// A tool call's argument values are text the model wrote, read the
	// same way.
	s.Arguments = s.New
	r.Register(s)
}

// Detector is the leak validator. Create it with New.
type Detector struct {
	cfg   Config
	allow map[string]bool

	ov   *overlap
	lits *literalMatcher

	off int

	word      []byte
	wordStart int
	inWord    bool
	// credFrom indexes the first byte of word at which a credential may
	// still begin (prefix.go); the word's bytes before it are cleared.
	credFrom  int
	line      []byte
	lineStart int
	// Line holds: offsets from which the line must be held (-1 = none).
	assignSeen bool
	kwFound    bool // the current line holds an assignment keyword
	kwScanned  int  // bytes of the current line already searched for one
	quoteHold  int
	beginHold  int
	dashes     int
	a0, a1, a2 byte // the last three bytes, lower-cased, to spot a word "aws"
	// The AWS secret-key window (aws.go): the line after a word "aws".
	awsSeen bool // the line has one (the line rule applies at its end)
	awsAt   int  // offset after the latest "aws" while its window is open, else -1
	awsFrom int  // index in line of that "aws"
	awsRun  int  // start of the run of key characters being read, else -1

	ovDone   bool
	findings []validator.Finding
	closed   bool
	scratch  []credMatch
	bufs     *buffers // where word and line came from, returned on Close

	// Markdown images (image.go).
	secrets  []string // the literal secrets matched, for a decoding's reader
	noImages bool     // a decoding's reader: no images of its own
	// gitleaks' rules over the stream (secretrules.Stream).
	rules *secretrules.Stream

	img mdimage.Scanner
}

// buffers are a closed detector's word and line, kept for the next one:
// a tool call's arguments are read by a new detector each, and growing
// the line to a long value's length was most of what one allocated.
type buffers struct{ word, line, rules []byte }

var bufferPool sync.Pool // *buffers

var _ validator.Validator = (*Detector)(nil)

// minCredWord is the length of the shortest word that can hold a
// credential the word rules know (a password in a URL: "a://b:cdefgh@i").
const minCredWord = 14

const (
	// maxGap is how many uncovered words a system-prompt run may
	// bridge: a changed or inserted phrase of up to this many words.
	maxGap      = 6
	maxWord     = 4096
	maxLine     = 8192
	maxFindings = 32
)

// New builds a detector for one request with the given system prompt.
func New(cfg Config, system string) (*Detector, error) { return NewFor(cfg, system, "") }

// NewFor builds a detector for one request with the given system prompt
// and the user's messages (a token the user wrote is not the system
// prompt's secret).
func NewFor(cfg Config, system, user string) (*Detector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &Detector{cfg: cfg, allow: map[string]bool{}, quoteHold: -1, awsAt: -1, awsRun: -1, beginHold: -1}
	var rulesBuf []byte
	if b, ok := bufferPool.Get().(*buffers); ok {
		d.bufs, d.word, d.line, rulesBuf = b, b.word[:0], b.line[:0], b.rules
	}
	if cfg.Rules {
		d.rules = secretrules.Default().NewStream(rulesBuf)
	}
	for _, a := range cfg.Allow {
		d.allow[strings.ToLower(a)] = true
	}
	if cfg.SystemPrompt && system != "" {
		d.ov = cachedOverlap(system, cfg.ShingleTokens, cfg.MinSystemTokens, cfg.MinLeakTokens, cfg.MinLeakFraction, maxGap)
	}
	var secrets []string
	if cfg.MarkedSecrets && system != "" {
		secrets = append(secrets, cachedSecrets(system)...)
	}
	for _, s := range cfg.Secrets {
		secrets = append(secrets, strings.TrimSpace(s))
	}
	if cfg.Canaries && system != "" {
		secrets = append(secrets, cachedCanaries(system, user)...)
	}
	var keep []string
	for _, s := range secrets {
		if !d.allow[strings.ToLower(s)] {
			keep = append(keep, s)
		}
	}
	if len(keep) > 0 {
		d.lits = newLiteralMatcher(keep)
		d.secrets = keep
	}
	// Image URLs are read for secrets and credentials; with neither
	// there is nothing to find in them.
	d.noImages = d.lits == nil && !cfg.Credentials
	return d, nil
}

// Name returns "leak".
func (d *Detector) Name() string { return Name }

// Findings returns the leaks so far, in order of Start.
func (d *Detector) Findings() []validator.Finding { return d.findings }

// Write feeds the next piece of output. Each rule reads the whole piece
// in a loop of its own (a byte-at-a-time call into every rule cost more
// than the rules); none reads another's state, and findings are kept in
// order of Start, so the result is the same as a byte at a time.
func (d *Detector) Write(p []byte) (int, error) {
	if d.closed || len(p) == 0 {
		return len(p), nil
	}
	at := d.off
	if d.rules != nil {
		d.rules.Write(p, d.reportRule)
	}
	if d.lits != nil {
		d.lits.write(p, at, d.reportLiteral)
	}
	if !d.noImages {
		d.images(p, at)
	}
	if d.ov != nil && !d.ovDone {
		if ok, s, e := d.ov.write(p, at); ok {
			d.reportOverlap(s, e)
		}
	}
	if d.cfg.Credentials {
		for i := 0; i < len(p); {
			if !plainCred[p[i]] || d.awsAt >= 0 {
				d.credByte(p[i], at+i)
				i++
				continue
			}
			j := i + 1
			for j < len(p) && plainCred[p[j]] {
				j++
			}
			d.plainRun(p[i:j], at+i)
			i = j
		}
		if d.inWord {
			for d.credFrom < len(d.word) && !mayBeginCred(d.word, d.credFrom) {
				d.credFrom++
			}
		}
	}
	d.off += len(p)
	return len(p), nil
}

// Close ends the last word and line and reports what waited for them.
func (d *Detector) Close() {
	if d.closed {
		return
	}
	if d.lits != nil {
		d.lits.flush(d.reportLiteral)
	}
	if img, ok := d.img.End(); ok {
		d.judgeImage(img)
	}
	d.endWord()
	d.endLine()
	if d.rules != nil {
		d.rules.Close(d.reportRule)
	}
	if d.ov != nil && !d.ovDone {
		if ok, s, e := d.ov.flush(d.off); ok {
			d.reportOverlap(s, e)
		}
	}
	d.closed = true
	// Nothing reads the word or the line once closed (Write ignores
	// input, Settled does not look at them).
	if d.bufs == nil {
		d.bufs = &buffers{}
	}
	d.bufs.word, d.bufs.line = d.word[:0], d.line[:0]
	if d.rules != nil {
		d.bufs.rules = d.rules.Buffer()
	}
	bufferPool.Put(d.bufs)
	d.bufs, d.word, d.line = nil, nil, nil
}

// Settled returns the start of the earliest text that could still be
// part of a leak.
func (d *Detector) Settled() int {
	if d.closed {
		if len(d.findings) > 0 {
			return d.findings[0].Start
		}
		return d.off
	}
	s := d.off
	if d.cfg.Credentials {
		if d.inWord && d.credFrom < len(d.word) {
			s = min(s, d.wordStart+d.credFrom)
		}
		if d.quoteHold >= 0 {
			s = min(s, d.quoteHold)
		}
		if h := d.awsHeld(); h >= 0 {
			s = min(s, h)
		}
		if d.beginHold >= 0 {
			s = min(s, d.beginHold)
		}
	}
	if d.lits != nil {
		s = min(s, d.lits.hold(d.off))
	}
	if d.rules != nil {
		s = min(s, d.rules.Held())
	}
	if h := d.imageHeld(); h >= 0 {
		s = min(s, h)
	}
	if d.ov != nil && !d.ovDone {
		s = min(s, d.ov.hold(d.off))
	}
	if len(d.findings) > 0 {
		s = min(s, d.findings[0].Start)
	}
	return s
}

// breaksWord reports whether c ends a word as the credential rules see
// it: white space, quotes, brackets and separators, none of which any
// credential shape contains. Ending words there keeps the held-back word
// short (a minified JSON document is many words, not one).
func breaksWord(c byte) bool {
	switch c {
	case ' ', '\n', '\t', '\r', '\f', '\v', '"', '\'', '`', '(', ')', '[', ']', '{', '}', '<', '>', ',', ';', '|', '\\':
		return true
	}
	return false
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'
}

// plainCred marks the bytes that only grow the word and the line: no
// white space, no word break, none that an assignment (':', '='), a PEM
// header ('-', 'B') or a word "aws" ('s') turns on. Most text is runs of
// them, taken in one step by plainRun.
var plainCred = func() (t [256]bool) {
	for c := range 256 {
		b := byte(c)
		t[c] = !isSpaceByte(b) && !breaksWord(b) && !strings.ContainsRune(":=-BsS", rune(b))
	}
	return t
}()

// plainRun feeds a run of plainCred bytes starting at offset at, outside
// an AWS key window: what credByte does for each, at once.
func (d *Detector) plainRun(run []byte, at int) {
	if !d.inWord {
		d.inWord, d.wordStart, d.credFrom = true, at, 0
	}
	d.word = append(d.word, run[:min(len(run), maxWord-len(d.word))]...)
	if len(d.line) == 0 {
		d.lineStart = at
	}
	d.line = append(d.line, run[:min(len(run), maxLine-len(d.line))]...)
	d.dashes = 0
	switch n := len(run); n {
	case 1:
		d.a0, d.a1, d.a2 = d.a1, d.a2, lower(run[0])
	case 2:
		d.a0, d.a1, d.a2 = d.a2, lower(run[0]), lower(run[1])
	default:
		d.a0, d.a1, d.a2 = lower(run[n-3]), lower(run[n-2]), lower(run[n-1])
	}
}

// lower lower-cases an ASCII letter.
func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// credByte feeds byte c at offset at to the credential rules.
func (d *Detector) credByte(c byte, at int) {
	if isSpaceByte(c) {
		d.endWord()
		if c == '\n' {
			d.endLine()
			d.lineStart = at + 1
		} else {
			if len(d.line) == 0 {
				d.lineStart = at
			}
			if len(d.line) < maxLine {
				d.line = append(d.line, c)
			}
			d.awsByte(c, at)
			if d.quoteHold >= 0 {
				d.quoteHold = -1 // a quoted value has no white space
			}
		}
		d.a0, d.a1, d.a2, d.dashes = d.a1, d.a2, c, 0
		return
	}
	if breaksWord(c) {
		// Quotes, brackets and separators end a credential-shaped word
		// but belong to the line.
		d.endWord()
	} else {
		if !d.inWord {
			d.inWord, d.wordStart, d.credFrom = true, at, 0
		}
		if len(d.word) < maxWord {
			d.word = append(d.word, c)
		}
	}
	if len(d.line) == 0 {
		d.lineStart = at
	}
	if len(d.line) < maxLine {
		d.line = append(d.line, c)
	}
	// Line holds, set before the text they guard is released.
	lc := c
	if lc >= 'A' && lc <= 'Z' {
		lc += 'a' - 'A'
	}
	d.awsByte(c, at)
	switch {
	case c == ':' || c == '=':
		d.assignSeen = true
	case (c == '"' || c == '\'' || c == '`') && d.quoteHold >= 0:
		d.quoteClosed()
	case (c == '"' || c == '\'' || c == '`') && d.assignSeen && d.lineHasAssignKeyword():
		d.quoteHold = at
	case c == 'B' && d.dashes >= 5 && d.beginHold < 0:
		d.beginHold = at - 5
	}
	if lc == 's' && d.a1 == 'a' && d.a2 == 'w' && !isAlnum(d.a0) {
		d.awsOpen(at)
	}
	if c == '-' {
		d.dashes++
	} else {
		d.dashes = 0
	}
	d.a0, d.a1, d.a2 = d.a1, d.a2, lc
}

func (d *Detector) endWord() {
	if !d.inWord {
		return
	}
	d.inWord, d.credFrom = false, 0
	if len(d.word) < minCredWord {
		d.word = d.word[:0]
		return // shorter than any credential shape: skip the conversion and regexps
	}
	d.scratch = scanWord(string(d.word), d.scratch[:0])
	for _, m := range d.scratch {
		d.reportCred(d.wordStart+m.start, d.wordStart+m.end, m.kind, string(d.word[m.start:m.end]))
	}
	d.word = d.word[:0]
}

func (d *Detector) endLine() {
	if len(d.line) > 0 && (d.quoteHold >= 0 || d.awsSeen || d.beginHold >= 0) {
		line := string(d.line)
		d.scratch = scanLine(line, d.beginHold >= 0, d.awsSeen, d.quoteHold >= 0, d.scratch[:0])
		for _, m := range d.scratch {
			d.reportCred(d.lineStart+m.start, d.lineStart+m.end, m.kind, line[m.start:m.end])
		}
	}
	d.line = d.line[:0]
	d.assignSeen, d.quoteHold, d.beginHold, d.dashes = false, -1, -1, 0
	d.awsSeen, d.awsAt, d.awsRun = false, -1, -1
	d.a0, d.a1, d.a2 = 0, 0, 0
	d.kwFound, d.kwScanned = false, 0
}

// assignKeywords are the names an assignment of a secret uses; one must
// come before the quoted value on the line.
var assignKeywords = []string{"pass", "pwd", "secret", "key", "token"}

// hasAssignKeyword reports whether line contains an assignment keyword,
// ASCII case-insensitively.
// lineHasAssignKeyword reports whether the current line holds an
// assignment keyword. The line only grows until it ends, so it searches
// only the bytes added since the last call (plus an overlap for a keyword
// cut by the previous end): rescanning the whole line at every quote made
// one-line JSON quadratic.
func (d *Detector) lineHasAssignKeyword() bool {
	if d.kwFound {
		return true
	}
	from := max(0, d.kwScanned-(maxAssignKeyword-1))
	d.kwScanned = len(d.line)
	d.kwFound = hasAssignKeyword(d.line[from:])
	return d.kwFound
}

// maxAssignKeyword is the length of the longest assignment keyword.
var maxAssignKeyword = func() int {
	n := 0
	for _, k := range assignKeywords {
		n = max(n, len(k))
	}
	return n
}()

func hasAssignKeyword(line []byte) bool {
	for _, k := range assignKeywords {
		for i := 0; i+len(k) <= len(line); i++ {
			j := 0
			for ; j < len(k); j++ {
				c := line[i+j]
				if c >= 'A' && c <= 'Z' {
					c += 'a' - 'A'
				}
				if c != k[j] {
					break
				}
			}
			if j == len(k) {
				return true
			}
		}
	}
	return false
}

func (d *Detector) reportCred(start, end int, kind, value string) {
	if d.allow[strings.ToLower(value)] {
		return
	}
	d.add(validator.Finding{
		Check: Name, Reason: validator.ReasonSecretLeak, Start: start, End: end,
		Message: fmt.Sprintf("credential in output: %s (%d bytes)", kind, end-start),
	})
}

// reportRule reports a match of gitleaks' rules; the message names the
// rule, never the secret.
func (d *Detector) reportRule(m secretrules.Match, secret string) {
	if d.allow[strings.ToLower(secret)] {
		return
	}
	d.add(validator.Finding{
		Check: Name, Reason: validator.ReasonSecretLeak, Start: m.Start, End: m.End,
		Message: fmt.Sprintf("credential in output: gitleaks rule %s (%d bytes)", m.Rule, m.End-m.Start),
	})
}

func (d *Detector) reportLiteral(start, end int, _ string) {
	d.add(validator.Finding{
		Check: Name, Reason: validator.ReasonSecretLeak, Start: start, End: end,
		Message: "a secret from the system prompt appears in the output",
	})
}

func (d *Detector) reportOverlap(start, end int) {
	d.ovDone = true
	d.add(validator.Finding{
		Check: Name, Reason: validator.ReasonSystemPromptLeak, Start: start, End: end,
		Message: fmt.Sprintf("the output copies the system prompt (%d+ words in one run)", d.ov.need),
	})
}

// add records a finding in order of Start, dropping exact duplicates (the
// same span found by two rules). Past maxFindings the latest in the text
// are dropped, so which are kept does not depend on the order the rules
// report in.
func (d *Detector) add(f validator.Finding) {
	for i, g := range d.findings {
		if g.Start == f.Start && g.End == f.End && g.Reason == f.Reason {
			// Two rules found the same span: keep one message whichever
			// reported first, so the findings do not depend on the split.
			if f.Message < g.Message {
				d.findings[i].Message = f.Message
			}
			return
		}
	}
	i := sort.Search(len(d.findings), func(i int) bool {
		a := d.findings[i]
		return a.Start > f.Start || a.Start == f.Start && a.End > f.End
	})
	if i >= maxFindings {
		return
	}
	if len(d.findings) < maxFindings {
		d.findings = append(d.findings, validator.Finding{})
	}
	copy(d.findings[i+1:], d.findings[i:])
	d.findings[i] = f
}
