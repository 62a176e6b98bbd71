package toolcalls

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Value is one string value inside a call's arguments, decoded from its
// JSON escapes, with the JSON pointer-like path to it ("body",
// "attachments/0/name"; "" for arguments that are a bare string).
type Value struct {
	Path string
	Text string
}

// MaxDepth bounds the nesting Values walks into.
const MaxDepth = 64

// Values returns the string values of a call's arguments in document
// order. Arguments that stop being JSON part-way (cut off, or broken)
// yield the values read before the break: a leak in the first fields of a
// call cut off mid-JSON is still a leak. Object keys are not values.
func Values(args string) []Value {
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	var out []Value
	type frame struct {
		path  string
		obj   bool
		key   string // the pending key of an object
		isKey bool   // the next string is a key
		n     int    // the next array index
	}
	var stack []frame
	child := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := &stack[len(stack)-1]
		var seg string
		if f.obj {
			seg = escapePointer(f.key)
			f.isKey = true
		} else {
			seg = strconv.Itoa(f.n)
			f.n++
		}
		if f.path == "" {
			return seg
		}
		return f.path + "/" + seg
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			if err == io.EOF {
				return out
			}
			return out
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= MaxDepth {
					return out
				}
				p := child()
				stack = append(stack, frame{path: p, obj: t == '{', isKey: t == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].isKey {
				stack[n-1].key = t
				stack[n-1].isKey = false
				continue
			}
			out = append(out, Value{Path: child(), Text: t})
		default:
			child()
		}
	}
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
	if strings.ContainsAny(text, "%+") {
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
func isBase64Byte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '_' || c == '-'
}

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
