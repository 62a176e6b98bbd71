package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// ArgsHash is "sha256:" and the hex SHA-256 of the calls' names and
// canonical arguments (keys sorted, no spaces, numbers as written), in
// index order: the same call sent with other spacing or key order hashes
// alike, any other name or value does not. Arguments that are not JSON
// are hashed as they came.
func ArgsHash(calls []validator.ToolCall) string {
	calls = slices.Clone(calls)
	slices.SortStableFunc(calls, func(a, b validator.ToolCall) int { return a.Index - b.Index })
	h := sha256.New()
	for _, c := range calls {
		h.Write([]byte(strconv.Itoa(c.Index)))
		h.Write([]byte{0})
		h.Write([]byte(c.Name))
		h.Write([]byte{0})
		h.Write(canonical(c.Arguments))
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// canonical re-encodes JSON with sorted keys; invalid JSON is kept.
func canonical(raw string) []byte {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return []byte(raw)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(raw)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// MaxPaths bounds the argument paths a record lists per call.
const MaxPaths = 64

// Describe is the calls as a record shows them: each tool's name and the
// paths of its arguments' leaves ("to", "cc/0", "body"), never a value.
func Describe(calls []validator.ToolCall) []events.ApprovalCall {
	out := make([]events.ApprovalCall, 0, len(calls))
	for _, c := range calls {
		out = append(out, events.ApprovalCall{Index: c.Index, Tool: c.Name, Paths: Paths(c.Arguments)})
	}
	return out
}

// Paths lists the leaf paths of a JSON arguments object, sorted, at most
// MaxPaths; arguments that are not JSON have none.
func Paths(args string) []string {
	var v any
	if json.Unmarshal([]byte(args), &v) != nil {
		return []string{}
	}
	out := []string{}
	var walk func(prefix string, v any, depth int)
	walk = func(prefix string, v any, depth int) {
		if len(out) >= MaxPaths {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 || depth > 16 {
				break
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(join(prefix, k), x[k], depth+1)
			}
			return
		case []any:
			if len(x) == 0 || depth > 16 {
				break
			}
			for i, e := range x {
				walk(join(prefix, strconv.Itoa(i)), e, depth+1)
			}
			return
		}
		if prefix != "" {
			out = append(out, prefix)
		}
	}
	walk("", v, 0)
	return out
}

func join(prefix, k string) string {
	k = strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
	if prefix == "" {
		return k
	}
	return prefix + "/" + k
}
