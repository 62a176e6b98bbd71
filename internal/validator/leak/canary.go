package leak

import (
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"github.com/aegis-sentinel/aegis/internal/secretrules"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// System-prompt canaries: every token of the system prompt that looks like
// a secret is watched for in the output, whatever words introduce it. A
// token is judged by its own shape, not by a label before it:
//
//   - a credential gitleaks' rules or the word rules recognise;
//   - letters mixed with digits ("4471-Bravo", "mirror-7Q2x-Lattice"),
//     scored higher when it begins with a digit, when several of its
//     groups mix letters and digits ("55AQ-91ZX"), when its character
//     classes alternate often, when its entropy is high, when it holds a
//     symbol inside ("Tangerine!Ferry42"), or when it stands in quotes;
//
// and it is left alone when it is an ordinary fact the assistant may be
// meant to share or a user's own word: numbers, dates, times, prices,
// phone numbers (no letters), e-mail addresses, URLs and domains,
// versions, quantities with a unit ("500mg"), hex identifiers (commit
// SHAs, checksums, UUIDs), placeholders, and any token the user's
// messages contain.
//
// Each canary is watched verbatim (ASCII case-insensitive), with its
// separators dropped or changed to a space, '-' or '_', hex-encoded, and
// base64-encoded (standard and URL alphabets, at each of the three byte
// alignments, the part of the encoding that does not depend on the bytes
// around it).

// canaryScore is the score a token needs.
const canaryScore = 3

var (
	reHexID    = regexp.MustCompile(`^(?:[0-9a-fA-F]{7,64}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$`)
	reUnitQty  = regexp.MustCompile(`^[0-9][0-9.,]*[a-zA-Z]{1,3}$`)
	reClock    = regexp.MustCompile(`(?i)^(?:\d{1,2}(?::\d{2})?(?:am|pm|h)?[-–/]?)+$`)
	reVersion  = regexp.MustCompile(`(?i)^v?\d+(?:\.\d+)+(?:[-+][0-9a-z.]+)?$`)
	reOrdinal  = regexp.MustCompile(`(?i)^\d+(?:st|nd|rd|th)$`)
	reDomainly = regexp.MustCompile(`(?i)^(?:[a-z0-9-]+\.)+[a-z]{2,}$`)
)

// Canaries returns the tokens of system that look like secrets and that
// user does not contain, cached by system prompt and user text.
func Canaries(system, user string) []string { return cachedCanaries(system, user) }

var (
	canaryCache  sync.Map // system + "\x00" + user -> []string
	canaryCached atomic.Int64
)

func cachedCanaries(system, user string) []string {
	key := system + "\x00" + user
	if v, ok := canaryCache.Load(key); ok {
		return v.([]string)
	}
	c := canaryVariants(canaries(system, user))
	if canaryCached.Add(1) <= secretsCacheMax {
		canaryCache.Store(key, c)
	}
	return c
}

const quoteChars = "\"'`“”‘’«»"

// canaries finds the secret-looking tokens of system.
func canaries(system, user string) []string {
	lowUser := strings.ToLower(user)
	var out []string
	seen := map[string]bool{}
	for _, raw := range strings.Fields(system) {
		quoted := strings.ContainsAny(raw[:1], quoteChars)
		tok := strings.Trim(raw, quoteChars+".,;:!?()[]{}<>*")
		if quoted && !strings.ContainsAny(raw, quoteChars[1:]) {
			quoted = false
		}
		if len(tok) < 6 || len(tok) > 200 || seen[tok] {
			continue
		}
		if !secretLikeToken(tok, quoted) || strings.Contains(lowUser, strings.ToLower(tok)) {
			continue
		}
		seen[tok] = true
		out = append(out, tok)
	}
	return out
}

// secretLikeToken scores one token of the system prompt.
func secretLikeToken(tok string, quoted bool) bool {
	if _, ok := secretrules.Default().IsSecret(tok); ok {
		return true
	}
	if len(scanWord(tok, nil)) > 0 {
		return true
	}
	if ordinaryFact(tok) {
		return false
	}
	letters, digits, symbols, mixedGroups, groups := 0, 0, 0, 0, 0
	transitions, prev := 0, 0
	gl, gd := false, false
	endGroup := func() {
		if gl || gd {
			groups++
		}
		if gl && gd {
			mixedGroups++
		}
		gl, gd = false, false
	}
	for i, r := range tok {
		cls := 0
		switch {
		case unicode.IsDigit(r):
			digits++
			gd = true
			cls = 1
		case unicode.IsUpper(r):
			letters++
			gl = true
			cls = 2
		case unicode.IsLetter(r):
			letters++
			gl = true
			cls = 3
		case r == '-' || r == '_' || r == '.' || r == '/':
			endGroup()
		default:
			if i > 0 && i < len(tok)-1 {
				symbols++
			}
			endGroup()
		}
		if cls != 0 && prev != 0 && cls != prev {
			transitions++
		}
		if cls != 0 {
			prev = cls
		} else {
			prev = 0
		}
	}
	endGroup()
	score := 0
	if letters > 0 && digits > 0 {
		score++
		if letters >= 2 && digits >= 2 {
			score++
		}
		if tok[0] >= '0' && tok[0] <= '9' {
			score++
		}
	}
	if mixedGroups >= 1 && groups >= 3 {
		score++
	}
	if transitions >= 4 {
		score++
	}
	if len(tok) >= 12 && secretrules.Entropy(tok) >= 3.5 && digits > 0 {
		score++
	}
	if symbols > 0 && letters > 0 {
		score += 2
	}
	if quoted && (digits > 0 || symbols > 0) {
		score++
	}
	return score >= canaryScore
}

// ordinaryFact reports whether tok is a kind of value an assistant is
// given to share: numbers, dates, phone numbers, addresses, versions.
func ordinaryFact(tok string) bool {
	letters := 0
	for _, r := range tok {
		if unicode.IsLetter(r) {
			letters++
		}
	}
	switch {
	case letters <= 1:
		return true // numbers, dates, times, prices, phone numbers
	case strings.Contains(tok, "@") && strings.Contains(tok[strings.Index(tok, "@"):], "."):
		return true // e-mail address
	case strings.Contains(tok, "://") || strings.HasPrefix(strings.ToLower(tok), "www."):
		return true
	case reDomainly.MatchString(tok), reHexID.MatchString(tok), reUnitQty.MatchString(tok),
		reClock.MatchString(tok), reVersion.MatchString(tok), reOrdinal.MatchString(tok):
		return true
	case placeholder(tok) || placeholderSecret(tok):
		return true
	}
	return false
}

// canaryVariants returns each canary with its normalised and encoded
// forms, each at least minSecretLen bytes.
func canaryVariants(cs []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(v string) {
		if len(v) >= minSecretLen && !seen[strings.ToLower(v)] {
			seen[strings.ToLower(v)] = true
			out = append(out, v)
		}
	}
	// Encoded forms sit inside longer runs of the same alphabet.
	addInner := func(v string) {
		if len(v) >= 8 && !seen[strings.ToLower(v)] {
			seen[strings.ToLower(v)] = true
			out = append(out, innerMark+v)
		}
	}
	for _, c := range cs {
		add(c)
		parts := strings.FieldsFunc(c, func(r rune) bool { return r == '-' || r == '_' || r == '.' || r == ' ' })
		if len(parts) > 1 {
			for _, sep := range []string{"", " ", "-", "_"} {
				add(strings.Join(parts, sep))
			}
		}
		addInner(hex.EncodeToString([]byte(c)))
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			for shift := range 3 {
				addInner(base64Core(enc, c, shift))
			}
		}
	}
	return out
}

// base64Core is the part of the base64 encoding of s that does not
// depend on its neighbours when s starts shift bytes into a 3-byte group.
func base64Core(enc *base64.Encoding, s string, shift int) string {
	pad := strings.Repeat("\x00", shift)
	e := strings.TrimRight(enc.EncodeToString([]byte(pad+s)), "=")
	// Skip the characters the padding touched; cut the last group, which
	// depends on what follows.
	skip := 0
	if shift > 0 {
		skip = (shift*8 + 5) / 6
	}
	end := (shift + len(s)) / 3 * 4
	if end <= skip {
		return ""
	}
	return e[skip:end]
}

// userText joins the request's user messages.
func userText(req *validator.Request) string {
	var b strings.Builder
	for _, m := range req.Messages {
		if m.Role == "user" {
			b.WriteString(m.Content)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
