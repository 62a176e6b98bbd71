package toolcalls

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Value is one string value inside a call's arguments, decoded from its
// JSON escapes, with the JSON pointer-like path to it ("body",
// "attachments/0/name"; "" for arguments that are a bare string).
type Value = validator.ArgValue

// MaxDepth bounds the nesting Values walks into.
const MaxDepth = 64

// Values returns the string values of a call's arguments in document
// order (Read). A check that judges a call reads Of(call) instead, which
// the pipeline read once for every check.
func Values(args string) []Value { return Read(args).Values }

// Valid reports whether the arguments are one JSON value and nothing
// else, as encoding/json.Valid does (Read; the fuzz test holds the two
// together).
func Valid(args string) bool { return Read(args).Valid }

// Of returns what call's arguments hold: call.Read when it was read from
// the same arguments, else a new reading.
func Of(call validator.ToolCall) *validator.ReadArgs {
	if r := call.Read; r != nil && r.Arguments == call.Arguments {
		return r
	}
	return Read(call.Arguments)
}

// Read reads a call's arguments once: their string values in document
// order and whether they are one JSON value. Arguments that stop being
// JSON part-way (cut off, or broken) yield the values read before the
// break: a leak in the first fields of a call cut off mid-JSON is still
// a leak. Object keys are not values. It reads the text in one pass
// without a tokenizer's allocations (the fuzz test holds it to one built
// on encoding/json's). The values must not be modified.
func Read(args string) *validator.ReadArgs {
	p := valueParser{s: args}
	n, whole := 0, false
	for {
		p.ws()
		if p.i >= len(p.s) {
			whole = n == 1
			break
		}
		if !p.value("", true, 0) {
			break
		}
		n++
	}
	p.out = p.out[:len(p.out):len(p.out)] // an append by a caller copies
	return &validator.ReadArgs{Arguments: args, Values: p.out, Valid: whole}
}

type valueParser struct {
	s   string
	i   int
	out []Value
	buf []byte
}

func (p *valueParser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func join(path, seg string) string {
	if path == "" {
		return seg
	}
	return path + "/" + seg
}

// value reads one value at path (root: the top level, whose path is "");
// false means the text broke off or broke.
func (p *valueParser) value(path string, top bool, depth int) bool {
	p.ws()
	if p.i >= len(p.s) {
		return false
	}
	switch c := p.s[p.i]; {
	case c == '{':
		if depth >= MaxDepth {
			return false
		}
		p.i++
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return true
		}
		for {
			p.ws()
			key, ok := p.str()
			if !ok {
				return false
			}
			p.ws()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return false
			}
			p.i++
			if !p.value(join(path, escapePointer(key)), false, depth+1) {
				return false
			}
			p.ws()
			if p.i >= len(p.s) {
				return false
			}
			switch p.s[p.i] {
			case ',':
				p.i++
			case '}':
				p.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		if depth >= MaxDepth {
			return false
		}
		p.i++
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return true
		}
		for n := 0; ; n++ {
			if !p.value(join(path, strconv.Itoa(n)), false, depth+1) {
				return false
			}
			p.ws()
			if p.i >= len(p.s) {
				return false
			}
			switch p.s[p.i] {
			case ',':
				p.i++
			case ']':
				p.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		v, ok := p.str()
		if ok {
			p.out = append(p.out, Value{Path: path, Text: v})
		}
		return ok
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.num(top)
	}
	return false
}

func (p *valueParser) lit(w string) bool {
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

// num reads a JSON number; inside a container it must end at a
// delimiter, at the top level (a stream of values) anywhere.
func (p *valueParser) num(top bool) bool {
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.s[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return false
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return false
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return false
		}
	}
	// A number must end where the text ends or a delimiter begins.
	if !top && p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r', ',', ']', '}':
		default:
			return false
		}
	}
	return true
}

// str reads a JSON string, decoded; invalid UTF-8 becomes U+FFFD byte by
// byte, as encoding/json decodes it.
func (p *valueParser) str() (string, bool) {
	if p.i >= len(p.s) || p.s[p.i] != '"' {
		return "", false
	}
	p.i++
	start := p.i
	// The common case: no escape and valid UTF-8 up to the closing quote.
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			if s := p.s[start:p.i]; utf8.ValidString(s) {
				p.i++
				return s, true
			}
			break
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.i++
	}
	p.i = start
	b := p.buf[:0]
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			p.buf = b
			return string(b), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", false
			}
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", false
				}
				if utf16.IsSurrogate(r) {
					if strings.HasPrefix(p.s[p.i:], "\\u") {
						save := p.i
						p.i += 2
						r2, ok := p.hex4()
						if ok {
							if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
								b = utf8.AppendRune(b, d)
								continue
							}
						}
						p.i = save
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			p.i += size
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
				continue
			}
			b = append(b, p.s[p.i-size:p.i]...)
		}
	}
	return "", false
}

func (p *valueParser) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	n, err := strconv.ParseUint(p.s[p.i:p.i+4], 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(n), true
}

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// A View is text a check reads for one call: a value as it is, or a
// decoding of part of it (URL escapes, base64, a URL's query parameter).
type View struct {
	// Path is the value's path (Value.Path).
	Path string
	// How says how the text was derived from the value: "" for the value
	// itself, else "url-decoded", "base64", "query parameter q".
	How  string
	Text string
}

var urlRE = regexp.MustCompile(`(?i)\b(?:https?|ftp)://[^\s<>"'\x60)\]]+`)

// maxViews bounds the decodings derived from one value.
const maxViews = 32

// Derived returns the decodings hidden in text: the URL-unescaped text,
// each URL's query parameter values and fragment, and base64 runs that
// decode to readable text (one level deep in each other: a base64 value in
// a URL's query is decoded too).
func Derived(text string) []View {
	var out []View
	add := func(how, s string) {
		if len(out) < maxViews && s != "" && s != text {
			out = append(out, View{How: how, Text: s})
		}
	}
	if strings.IndexByte(text, '%') >= 0 || strings.IndexByte(text, '+') >= 0 {
		if u, err := url.QueryUnescape(text); err == nil && u != text {
			add("url-decoded", u)
		} else if u, err := url.PathUnescape(text); err == nil && u != text {
			add("url-decoded", u)
		}
	}
	var urls []string
	if strings.Contains(text, "://") {
		urls = urlRE.FindAllString(text, 8)
	}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		q, _ := url.ParseQuery(u.RawQuery)
		for k, vs := range q {
			for _, v := range vs {
				add("query parameter "+k, v)
				for _, b := range base64Runs(v) {
					add("base64 in query parameter "+k, b)
				}
			}
		}
		if f := u.Fragment; f != "" {
			add("URL fragment", f)
		}
		if p, err := url.PathUnescape(u.EscapedPath()); err == nil {
			for _, b := range base64Runs(p) {
				add("base64 in URL path", b)
			}
		}
	}
	for _, b := range base64Runs(text) {
		add("base64", b)
	}
	return out
}

// base64Runs returns the readable decodings of base64-looking runs in s.
func base64Runs(s string) []string {
	var out []string
	tried := 0
	for i := 0; i < len(s) && tried < 8; {
		if !isBase64Byte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isBase64Byte(s[j]) {
			j++
		}
		end := j
		for end < len(s) && end < j+2 && s[end] == '=' {
			end++
		}
		if j-i >= 16 {
			tried++
			if d, ok := decodeBase64(s[i:end]); ok {
				out = append(out, d)
			}
		}
		i = end
	}
	return out
}

// isBase64Byte: a byte of the standard or URL-safe base64 alphabet.
func isBase64Byte(c byte) bool { return base64Alphabet[c] }

var base64Alphabet = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '_' || c == '-'
	}
	return t
}()

func decodeBase64(s string) (string, bool) {
	t := strings.TrimRight(s, "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(t)
		if err != nil || len(b) < 6 || !utf8.Valid(b) {
			continue
		}
		if readable(b) {
			return string(b), true
		}
	}
	return "", false
}

// readable: text a person could read (a secret, a sentence), not the
// random bytes an ordinary identifier decodes to.
func readable(b []byte) bool {
	good := 0
	for _, r := range string(b) {
		if r == '\n' || r == '\t' || (r >= 0x20 && r != 0x7f && r != utf8.RuneError) {
			good++
		}
	}
	return good == utf8.RuneCount(b) && bytes.IndexFunc(b, func(r rune) bool {
		return r >= 'A' && r <= 'z' || r >= '0' && r <= '9'
	}) >= 0
}
