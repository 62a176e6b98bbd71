package jsonsyntax

import (
	"bytes"
)

// Repair mechanically fixes the common, unambiguous ways a model breaks
// JSON and returns the repaired text and true when the result is valid
// JSON. It fixes:
//
//   - a markdown code fence around the document (```json ... ```),
//   - trailing commas before '}' or ']',
//   - single-quoted strings and keys (turned into double-quoted ones,
//     escaping inner double quotes),
//   - a document cut off at the end (an unterminated string is closed, a
//     dangling ',' dropped, a dangling ':' or key completed with null, and
//     the open containers closed in order).
//
// It does not guess at anything else (prose around the value, NaN,
// unquoted keys, missing commas): for those it returns nil, false.
func Repair(text []byte) ([]byte, bool) {
	t := bytes.TrimSpace(text)
	if bytes.HasPrefix(t, []byte("```")) {
		nl := bytes.IndexByte(t, '\n')
		if nl < 0 {
			return nil, false
		}
		t = t[nl+1:]
		if k := bytes.LastIndex(t, []byte("```")); k >= 0 {
			t = t[:k]
		}
		t = bytes.TrimSpace(t)
	}
	out := make([]byte, 0, len(t)+8)
	var stack []byte
	// expectKey is true where the next string is an object key (so a
	// value is owed after it at end of input).
	i := 0
	for i < len(t) {
		c := t[i]
		switch c {
		case '"':
			j, closed := scanString(t, i+1, '"')
			out = append(out, t[i:j]...)
			if !closed {
				out = append(out, '"')
			}
			i = j
			continue
		case '\'':
			j, closed := scanString(t, i+1, '\'')
			end := j
			if closed {
				end = j - 1
			}
			out = append(out, '"')
			out = appendRequoted(out, t[i+1:end])
			out = append(out, '"')
			i = j
			continue
		case ',':
			k := i + 1
			for k < len(t) && isSpace(t[k]) {
				k++
			}
			if k == len(t) || t[k] == '}' || t[k] == ']' {
				i++ // drop the trailing comma
				continue
			}
		case '{', '[':
			stack = append(stack, c)
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
		out = append(out, c)
		i++
	}
	// Close what the cut-off left open.
	for len(stack) > 0 {
		out = bytes.TrimRight(out, " \t\r\n")
		open := stack[len(stack)-1]
		if n := len(out); n > 0 && out[n-1] == ':' {
			out = append(out, "null"...)
		} else if open == '{' && n > 0 && out[n-1] == '"' && danglingKey(out) {
			out = append(out, ":null"...)
		}
		if open == '{' {
			out = append(out, '}')
		} else {
			out = append(out, ']')
		}
		stack = stack[:len(stack)-1]
	}
	if !Valid(out) {
		return nil, false
	}
	return out, true
}

// scanString returns the index after the closing quote q of a string whose
// body starts at i, and whether the closing quote was found.
func scanString(t []byte, i int, q byte) (int, bool) {
	for i < len(t) {
		switch t[i] {
		case '\\':
			i += 2
			continue
		case q:
			return i + 1, true
		}
		i++
	}
	return len(t), false
}

// appendRequoted appends the body of a single-quoted string as the body of
// a double-quoted one.
func appendRequoted(out, body []byte) []byte {
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '\\' && i+1 < len(body) && body[i+1] == '\'':
			out = append(out, '\'')
			i++
		case c == '\\' && i+1 < len(body):
			out = append(out, c, body[i+1])
			i++
		case c == '"':
			out = append(out, '\\', '"')
		default:
			out = append(out, c)
		}
	}
	return out
}

// danglingKey reports whether out (ending in a closing quote inside an
// object) ends with a key that has no value: the byte before the string
// is '{' or ','.
func danglingKey(out []byte) bool {
	i := len(out) - 2
	for i >= 0 {
		if out[i] == '"' {
			k, bs := i-1, 0
			for k >= 0 && out[k] == '\\' {
				bs++
				k--
			}
			if bs%2 == 0 {
				break
			}
		}
		i--
	}
	i--
	for i >= 0 && isSpace(out[i]) {
		i--
	}
	return i >= 0 && (out[i] == '{' || out[i] == ',')
}
