package toolcalls

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
)

// referenceValues is Values written with encoding/json's tokenizer: the
// reference the fuzz test holds Values to. It returns the string values of a call's arguments in document
// order. Arguments that stop being JSON part-way (cut off, or broken)
// yield the values read before the break: a leak in the first fields of a
// call cut off mid-JSON is still a leak. Object keys are not values.
func referenceValues(args string) []Value {
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
