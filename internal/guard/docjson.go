package guard

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// isJSONLines reports whether t is JSON Lines: each of its first lines
// a JSON value (the last may be cut).
func isJSONLines(t string) bool {
	lines := strings.SplitN(t, "\n", sniffLines+1)
	if len(lines) < 2 {
		return false
	}
	if len(lines) > sniffLines {
		lines = lines[:sniffLines]
	}
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || json.Valid([]byte(l)) || i == len(lines)-1 {
			continue
		}
		return false
	}
	return true
}

// isCutJSON reports whether t is JSON cut short (a tool or a reader
// stopped at a size limit): closing what is open at its last line break
// makes it valid.
func isCutJSON(t string) bool {
	var stack []byte
	inStr, esc, lastNL, nlDepth := false, false, -1, 0
	var nlStack []byte
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case esc:
			esc = false
		case inStr:
			switch c {
			case '\\':
				esc = true
			case '"':
				inStr = false
			case '\n':
				return false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			if len(stack) >= 512 {
				return false
			}
			stack = append(stack, c)
		case c == '}' || c == ']':
			if len(stack) == 0 {
				return false
			}
			stack = stack[:len(stack)-1]
		case c == '\n':
			lastNL, nlDepth = i, len(stack)
			nlStack = append(nlStack[:0], stack...)
		}
	}
	if lastNL < 0 || nlDepth == 0 {
		return false
	}
	cut := strings.TrimRight(t[:lastNL], " \t\r\n,")
	var b strings.Builder
	b.WriteString(cut)
	for i := len(nlStack) - 1; i >= 0; i-- {
		if nlStack[i] == '{' {
			b.WriteByte('}')
		} else {
			b.WriteByte(']')
		}
	}
	return json.Valid([]byte(b.String()))
}

// jsonSpans emits every string of two words or more (values, rarely
// keys) of a JSON document; a string that is itself JSON is read too.
// JSON Lines are read line by line; from the first line that is not one
// JSON value on, and for a document cut short, the strings are read with
// encoding/json's Decoder up to its first error.
func jsonSpans(text string, emit func(string)) {
	n := 0
	str := func(s string) bool {
		if strings.TrimSpace(s) == "" {
			return n < maxSpans
		}
		if t := strings.TrimSpace(s); len(t) > 1 && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
			jsonSpans(t, emit)
			return n < maxSpans
		}
		if strings.Contains(strings.TrimSpace(s), " ") { // keys and codes are single words
			emit(s)
			n++
		}
		return n < maxSpans
	}
	// A document that opens an object or array and does not close one is
	// not valid (most often cut short): no need to scan it to find out.
	t := strings.TrimSpace(text)
	closed := t != "" && (t[0] != '{' && t[0] != '[' || t[len(t)-1] == '}' || t[len(t)-1] == ']')
	if closed && json.Valid([]byte(text)) {
		jsonStrings(text, str)
		return
	}
	rest := text
	for rest != "" {
		line, after, _ := strings.Cut(rest, "\n")
		if strings.TrimSpace(line) != "" {
			if !json.Valid([]byte(line)) {
				break
			}
			if !jsonStrings(line, str) {
				return
			}
		}
		rest = after
	}
	// A document cut short after a line break: the strings before the
	// break are scanned; the Decoder reads only the cut line, after an
	// opening that leaves it in the state the document's start left it.
	if open, cut, ok := cutJSONState(rest); ok {
		if !jsonStrings(rest[:cut], str) {
			return
		}
		rest = open + rest[cut:]
	}
	d := json.NewDecoder(strings.NewReader(rest))
	d.UseNumber()
	for n < maxSpans {
		tok, err := d.Token()
		if err != nil {
			return
		}
		if s, ok := tok.(string); ok && !str(s) {
			return
		}
	}
}

// cutJSONState reads t as JSON cut short: when closing what is open at
// its last line break makes it valid, it returns that break's offset cut
// and open, the shortest JSON text whose strings are all empty that
// leaves a parser where t[:cut] leaves it (inside the same containers,
// expecting the same kind of token), so that open+t[cut:] is parsed as
// t's last line is.
func cutJSONState(t string) (open string, cut int, ok bool) {
	// expect: what may come next at the innermost level.
	const (
		expValue = iota // a value (or, after '[' only, ']')
		expKey          // a key (or, after '{' only, '}')
		expColon
		expMore // ',' or the container's end
	)
	type frame struct {
		c     byte
		empty bool // nothing read in it yet
	}
	var stack []frame
	expect := expValue
	var nlStack []frame
	nlExpect, lastNL := 0, -1
	after := func() { // a value ended
		if len(stack) > 0 {
			stack[len(stack)-1].empty = false
		}
		expect = expMore
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch c {
		case ' ', '\t', '\r':
		case '\n':
			lastNL, nlExpect = i, expect
			nlStack = append(nlStack[:0], stack...)
		case '"':
			j := i + 1
			for ; j < len(t) && t[j] != '"'; j++ {
				if t[j] == '\\' {
					j++
				} else if t[j] == '\n' {
					return "", 0, false
				}
			}
			if j >= len(t) {
				i = j
				continue
			}
			if expect == expKey {
				expect = expColon
				if len(stack) > 0 {
					stack[len(stack)-1].empty = false
				}
			} else {
				after()
			}
			i = j
		case '{', '[':
			if len(stack) >= 512 {
				return "", 0, false
			}
			stack = append(stack, frame{c, true})
			expect = expValue
			if c == '{' {
				expect = expKey
			}
		case '}', ']':
			if len(stack) == 0 {
				return "", 0, false
			}
			stack = stack[:len(stack)-1]
			after()
		case ':':
			expect = expValue
		case ',':
			expect = expValue
			if len(stack) > 0 && stack[len(stack)-1].c == '{' {
				expect = expKey
			}
		default: // a number or a literal
			for i+1 < len(t) && !strings.ContainsRune(" \t\r\n,:{}[]\"", rune(t[i+1])) {
				i++
			}
			after()
		}
	}
	if lastNL < 0 || len(nlStack) == 0 {
		return "", 0, false
	}
	var closed strings.Builder
	// One trailing comma is dropped (the cut came after it); two would be
	// an error the Decoder stops at.
	closed.WriteString(strings.TrimSuffix(strings.TrimRight(t[:lastNL], " \t\r\n"), ","))
	for i := len(nlStack) - 1; i >= 0; i-- {
		if nlStack[i].c == '{' {
			closed.WriteByte('}')
		} else {
			closed.WriteByte(']')
		}
	}
	if !json.Valid([]byte(closed.String())) {
		return "", 0, false
	}
	var b strings.Builder
	for i, f := range nlStack {
		inner := i == len(nlStack)-1
		b.WriteByte(f.c)
		switch {
		case !inner && f.c == '{':
			b.WriteString(`"":`)
		case !inner:
		case f.c == '{' && nlExpect == expKey && f.empty:
		case f.c == '{' && nlExpect == expKey:
			b.WriteString(`"":0,`)
		case f.c == '{' && nlExpect == expColon:
			b.WriteString(`""`)
		case f.c == '{' && nlExpect == expValue:
			b.WriteString(`"":`)
		case f.c == '{':
			b.WriteString(`"":0`)
		case nlExpect == expValue && f.empty:
		case nlExpect == expValue:
			b.WriteString(`0,`)
		default:
			b.WriteString(`0`)
		}
	}
	return b.String(), lastNL, true
}

// jsonStrings calls str with each string (key or value) of the valid
// JSON text in order, decoded as encoding/json decodes it, until str
// returns false; it reports whether str never did.
func jsonStrings(text string, str func(string) bool) bool {
	for i := 0; i < len(text); i++ {
		if text[i] != '"' {
			continue
		}
		j, plain := i+1, true
		for ; j < len(text) && text[j] != '"'; j++ {
			if text[j] == '\\' {
				plain = false
				j++
			}
		}
		raw := text[i+1 : min(j, len(text))]
		if !plain || !utf8.ValidString(raw) {
			// Escapes, and invalid UTF-8 (which encoding/json replaces
			// with U+FFFD), are decoded by encoding/json itself.
			var s string
			if err := json.Unmarshal([]byte(text[i:min(j+1, len(text))]), &s); err != nil {
				return true // not reached: the text is valid JSON
			}
			raw = s
		}
		if !str(raw) {
			return false
		}
		i = j
	}
	return true
}
