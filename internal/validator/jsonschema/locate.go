package jsonschema

import (
	"encoding/json"
	"strconv"

	"github.com/aegis-sentinel/aegis/internal/validator/jsonsyntax"
)

// Locate returns the byte span of the value at the instance location
// tokens in doc, or the whole document when it cannot be found. It is
// used on the failure path only.
func Locate(doc []byte, tokens []string) (int, int) {
	l := &locator{target: tokens, start: -1}
	s := jsonsyntax.NewScanner(0, l)
	s.Write(doc)
	s.Close()
	if l.start < 0 || l.end < l.start {
		return 0, len(doc)
	}
	return l.start, l.end
}

type locFrame struct {
	array bool
	index int
	key   string
}

type locator struct {
	target     []string
	frames     []locFrame
	start, end int
	depth      int // frame depth of the found value, to match its end
	found      bool
}

func (l *locator) matches() bool {
	if len(l.frames) != len(l.target) {
		return false
	}
	for i, f := range l.frames {
		tok := f.key
		if f.array {
			tok = strconv.Itoa(f.index - 1)
		}
		if tok != l.target[i] {
			return false
		}
	}
	return true
}

func (l *locator) BeginValue(k jsonsyntax.Kind, off int) {
	if n := len(l.frames); n > 0 && l.frames[n-1].array {
		l.frames[n-1].index++
	}
	if !l.found && l.matches() {
		l.found, l.start, l.depth = true, off, len(l.frames)
	}
	if k == jsonsyntax.KindObject || k == jsonsyntax.KindArray {
		l.frames = append(l.frames, locFrame{array: k == jsonsyntax.KindArray})
	}
}

func (l *locator) Key(raw []byte, start, end int) {
	l.frames[len(l.frames)-1].key = decodeKey(raw)
}

func (l *locator) EndValue(k jsonsyntax.Kind, raw []byte, end int) {
	if k == jsonsyntax.KindObject || k == jsonsyntax.KindArray {
		l.frames = l.frames[:len(l.frames)-1]
	}
	if l.found && l.end == 0 && len(l.frames) == l.depth {
		l.end = end
	}
}

// decodeKey returns the string a raw JSON string token denotes ("" when
// the token was not captured).
func decodeKey(raw []byte) string {
	if len(raw) < 2 {
		return ""
	}
	body := raw[1 : len(raw)-1]
	simple := true
	for _, c := range body {
		if c == '\\' {
			simple = false
			break
		}
	}
	if simple {
		return string(body)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return ""
	}
	return s
}

// keyBytes returns the bytes a raw JSON string token denotes, without
// copying when it has no escapes.
func keyBytes(raw []byte) []byte {
	if len(raw) < 2 {
		return nil
	}
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c == '\\' {
			return []byte(decodeKey(raw))
		}
	}
	return body
}
