package jsonschema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	js "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aegis-sentinel/aegis/internal/validator/jsonsyntax"
)

// The tracker fails a streaming document early, on a prefix that can no
// longer satisfy the schema. It follows, for each value, only the
// subschemas that are necessary conditions on it: the schema itself, its
// $ref and allOf members (recursively), properties[key], matching
// patternProperties, additionalProperties, prefixItems/items and
// additionalItems. anyOf, oneOf, not, if/then/else, dependent schemas and
// unevaluated* are alternatives or context-dependent, so the tracker never
// descends into them: a value under them is judged only at Close by the
// full validator. Within the followed schemas it checks only keywords
// that a prefix decides for good:
//
//   - false schemas (any value fails),
//   - type, from the value's first byte (integer at the number's end),
//   - enum and const, by the container kind at the first byte and by
//     value for complete scalars,
//   - additionalProperties: false, at an unknown key,
//   - additionalItems: false / maxItems, at the element that is one too many,
//   - required, at the '}' of an object that lacks a required key.
//
// Every check is a necessary condition, so an early failure is always
// also a failure of the full validation (the table tests check both).

const maxExpand = 64

// typeMask is a set of JSON types, computed once per schema.
type typeMask uint8

const (
	tNull typeMask = 1 << iota
	tBool
	tNumber
	tInteger
	tString
	tArray
	tObject
	tAll typeMask = 0xff
)

func maskOf(s *js.Schema) typeMask {
	if s.Types == nil || s.Types.IsEmpty() {
		return tAll
	}
	var m typeMask
	for _, t := range s.Types.ToStrings() {
		switch t {
		case "null":
			m |= tNull
		case "boolean":
			m |= tBool
		case "number":
			m |= tNumber | tInteger
		case "integer":
			m |= tInteger
		case "string":
			m |= tString
		case "array":
			m |= tArray
		case "object":
			m |= tObject
		}
	}
	return m
}

func kindMask(k jsonsyntax.Kind) typeMask {
	switch k {
	case jsonsyntax.KindNull:
		return tNull
	case jsonsyntax.KindBool:
		return tBool
	case jsonsyntax.KindNumber:
		return tNumber | tInteger
	case jsonsyntax.KindString:
		return tString
	case jsonsyntax.KindArray:
		return tArray
	case jsonsyntax.KindObject:
		return tObject
	}
	return 0
}

func valueMask(v any) typeMask {
	switch v.(type) {
	case nil:
		return tNull
	case bool:
		return tBool
	case json.Number, float64, int:
		return tNumber | tInteger
	case string:
		return tString
	case []any:
		return tArray
	case map[string]any:
		return tObject
	}
	return 0
}

// early is the first early failure.
type early struct {
	pointer    string
	start, end int
	msg        string
}

type tframe struct {
	kind    jsonsyntax.Kind
	schemas []*js.Schema
	child   []*js.Schema // schemas of the value after the current key
	index   int          // elements seen (arrays)
	keys    keySet       // the object's keys; the last one is the current key
	track   bool         // keys are needed (required, property counts, decisive)
	open    int          // offset of '{' or '['
}

// keySet holds the keys of one object, decoded, in one reusable byte
// arena; membership is a linear scan (objects in model output are small),
// so a streamed object costs no allocation per key.
type keySet struct {
	arena  []byte
	ends   []int
	unique int
}

func (k *keySet) reset() { k.arena, k.ends, k.unique = k.arena[:0], k.ends[:0], 0 }

func (k *keySet) has(key string) bool {
	start := 0
	for _, end := range k.ends {
		if string(k.arena[start:end]) == key {
			return true
		}
		start = end
	}
	return false
}

// add appends key and reports whether it was already there.
func (k *keySet) add(key []byte) bool {
	dup := k.has(string(key))
	if k.ends == nil {
		k.arena, k.ends = make([]byte, 0, 128), make([]int, 0, 8)
	}
	k.arena = append(k.arena, key...)
	k.ends = append(k.ends, len(k.arena))
	if !dup {
		k.unique++
	}
	return dup
}

// last returns the most recently added key.
func (k *keySet) last() []byte {
	n := len(k.ends)
	if n == 0 {
		return nil
	}
	start := 0
	if n > 1 {
		start = k.ends[n-2]
	}
	return k.arena[start:k.ends[n-1]]
}

type tracker struct {
	comp   *Compiled
	root   []*js.Schema
	frames []tframe
	scalar []*js.Schema // schemas of the scalar being scanned
	fail   *early
	// undecided is set when some value could not be judged here (a
	// token too long to capture, a number too large to compare exactly,
	// a duplicate key): the full validation must then run at Close even
	// for a schema the tracker decides.
	undecided bool
	rat       big.Rat // reused for number checks
}

func newTracker(comp *Compiled) *tracker {
	return &tracker{comp: comp, root: comp.root}
}

// node is what the tracker derives from one schema, computed once per
// compiled schema and shared by all validators using it.
type node struct {
	mask typeMask
	exp  []*js.Schema // the schema and what it requires; cap == len
}

func (c *Compiled) node(s *js.Schema) *node {
	if n, ok := c.nodes[s]; ok {
		return n
	}
	return newNode(s) // not reachable by the tracker's walk; not cached
}

func newNode(s *js.Schema) *node {
	exp := expandInto(nil, s)
	return &node{mask: maskOf(s), exp: exp[:len(exp):len(exp)]}
}

// addNodes computes the node of s and of every subschema the tracker
// may follow from it.
func (c *Compiled) addNodes(s *js.Schema) {
	if s == nil {
		return
	}
	if _, ok := c.nodes[s]; ok {
		return
	}
	c.nodes[s] = newNode(s)
	for _, sub := range followed(s) {
		c.addNodes(sub)
	}
}

// expand appends s and the schemas it requires unconditionally to dst.
// The result may share the cached expansion (clipped, so appending to it
// copies); callers never write into it in place.
func (t *tracker) expand(dst []*js.Schema, s *js.Schema) []*js.Schema {
	if s == nil {
		return dst
	}
	e := t.comp.node(s).exp
	if len(dst) == 0 {
		return e
	}
outer:
	for _, x := range e {
		for _, d := range dst {
			if d == x {
				continue outer
			}
		}
		if len(dst) >= maxExpand {
			break
		}
		dst = append(dst, x)
	}
	return dst
}

// expandInto appends s and the schemas it requires unconditionally ($ref,
// allOf, recursively) to dst.
func expandInto(dst []*js.Schema, s *js.Schema) []*js.Schema {
	if s == nil || len(dst) >= maxExpand {
		return dst
	}
	for _, d := range dst {
		if d == s {
			return dst
		}
	}
	if s.Bool != nil && *s.Bool {
		return dst
	}
	dst = append(dst, s)
	dst = expandInto(dst, s.Ref)
	for _, a := range s.AllOf {
		dst = expandInto(dst, a)
	}
	return dst
}

func (t *tracker) mask(s *js.Schema) typeMask { return t.comp.node(s).mask }

func (t *tracker) failAt(start, end int, extra string, format string, args ...any) {
	p := t.pointer(extra)
	msg := fmt.Sprintf(format, args...)
	t.fail = &early{pointer: p, start: start, end: end, msg: describe(p, msg)}
}

// pointer is the JSON pointer of the current value; extra is appended
// when non-empty (a key).
func (t *tracker) pointer(extra string) string {
	var b strings.Builder
	for _, f := range t.frames {
		if f.kind == jsonsyntax.KindArray {
			b.WriteByte('/')
			b.WriteString(strconv.Itoa(f.index - 1))
		} else {
			b.WriteString(pointer([]string{string(f.keys.last())}))
		}
	}
	if extra != "" {
		b.WriteString(pointer([]string{extra}))
	}
	return b.String()
}

// BeginValue implements jsonsyntax.Handler.
func (t *tracker) BeginValue(k jsonsyntax.Kind, off int) {
	if t.fail != nil {
		return
	}
	var schemas []*js.Schema
	if n := len(t.frames); n == 0 {
		schemas = t.root
	} else {
		f := &t.frames[n-1]
		if f.kind == jsonsyntax.KindObject {
			schemas = f.child
		} else {
			schemas = t.itemSchemas(f, off)
			if t.fail != nil {
				return
			}
		}
	}
	km := kindMask(k)
	for _, s := range schemas {
		if s.Bool != nil && !*s.Bool {
			t.failAt(off, off+1, "", "no value is allowed here (false schema)")
			return
		}
		if t.mask(s)&km == 0 {
			t.failAt(off, off+1, "", "got %s, want %s", k, s.Types)
			return
		}
		if k == jsonsyntax.KindObject || k == jsonsyntax.KindArray {
			if s.Enum != nil && !anyMask(s.Enum.Values, km) {
				t.failAt(off, off+1, "", "%s cannot match enum %s", k, short(s.Enum.Values))
				return
			}
			if s.Const != nil && valueMask(*s.Const)&km == 0 {
				t.failAt(off, off+1, "", "%s cannot match const %s", k, short([]any{*s.Const}))
				return
			}
		}
	}
	switch k {
	case jsonsyntax.KindObject, jsonsyntax.KindArray:
		// Reuse the frame slot (and its key arena) from earlier containers.
		n := len(t.frames)
		if n < cap(t.frames) {
			t.frames = t.frames[:n+1]
		} else {
			t.frames = append(t.frames, tframe{})
		}
		f := &t.frames[n]
		keys := f.keys
		keys.reset()
		*f = tframe{kind: k, schemas: schemas, open: off, keys: keys}
		if k == jsonsyntax.KindObject {
			f.track = t.comp.Decisive
			for _, s := range schemas {
				if len(s.Required) > 0 || s.MinProperties != nil || s.MaxProperties != nil {
					f.track = true
					break
				}
			}
		}
	default:
		t.scalar = schemas
	}
}

func anyMask(vals []any, km typeMask) bool {
	for _, v := range vals {
		if valueMask(v)&km != 0 {
			return true
		}
	}
	return false
}

func short(vals []any) string {
	b, _ := json.Marshal(vals)
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// itemSchemas counts the next element of array frame f and returns the
// schemas it must satisfy.
func (t *tracker) itemSchemas(f *tframe, off int) []*js.Schema {
	i := f.index
	f.index++
	var out []*js.Schema
	for _, s := range f.schemas {
		if s.MaxItems != nil && f.index > *s.MaxItems {
			t.failAt(off, off+1, "", "array has more than maxItems %d items", *s.MaxItems)
			return nil
		}
		if s.DraftVersion >= 2020 {
			if i < len(s.PrefixItems) {
				out = t.expand(out, s.PrefixItems[i])
			} else if s.Items2020 != nil {
				out = t.expand(out, s.Items2020)
			}
			continue
		}
		switch items := s.Items.(type) {
		case *js.Schema:
			out = t.expand(out, items)
		case []*js.Schema:
			if i < len(items) {
				out = t.expand(out, items[i])
				break
			}
			switch ai := s.AdditionalItems.(type) {
			case bool:
				if !ai {
					t.failAt(off, off+1, "", "array has more than the %d items allowed (additionalItems: false)", len(items))
					return nil
				}
			case *js.Schema:
				out = t.expand(out, ai)
			}
		}
	}
	return out
}

// Key implements jsonsyntax.Handler.
func (t *tracker) Key(raw []byte, start, end int) {
	if t.fail != nil {
		return
	}
	f := &t.frames[len(t.frames)-1]
	if raw == nil { // too long to capture: stop judging this object's members
		f.keys.add(nil)
		f.child = nil
		f.schemas = nil
		t.undecided = true
		return
	}
	kb := keyBytes(raw)
	if f.keys.add(kb) && f.track {
		// A duplicate key: a parser keeps the last value, the stream
		// shows both. Judge both here, but let Close decide.
		t.undecided = true
	}
	key := f.keys.last()
	if f.track {
		for _, s := range f.schemas {
			if s.MaxProperties != nil && f.keys.unique > *s.MaxProperties {
				t.failAt(start, end, "", "more than maxProperties %d properties", *s.MaxProperties)
				return
			}
		}
	}
	f.child = nil
	for _, s := range f.schemas {
		matched := false
		if p, ok := s.Properties[string(key)]; ok {
			matched = true
			f.child = t.expand(f.child, p)
		}
		for re, p := range s.PatternProperties {
			if re.MatchString(string(key)) {
				matched = true
				f.child = t.expand(f.child, p)
			}
		}
		if matched {
			continue
		}
		switch ap := s.AdditionalProperties.(type) {
		case bool:
			if !ap {
				t.failAt(start, end, "", "unknown property %q (additionalProperties: false)", string(key))
				return
			}
		case *js.Schema:
			f.child = t.expand(f.child, ap)
		}
	}
}

// EndValue implements jsonsyntax.Handler.
func (t *tracker) EndValue(k jsonsyntax.Kind, raw []byte, end int) {
	if t.fail != nil {
		return
	}
	if k != jsonsyntax.KindObject && k != jsonsyntax.KindArray {
		t.endScalar(k, raw, end)
		return
	}
	f := t.frames[len(t.frames)-1]
	t.frames = t.frames[:len(t.frames)-1]
	for _, s := range f.schemas {
		if k == jsonsyntax.KindObject {
			for _, r := range s.Required {
				if !f.keys.has(r) {
					t.failAtFrame(f, end, "missing required property %q", r)
					return
				}
			}
			if s.MinProperties != nil && f.keys.unique < *s.MinProperties {
				t.failAtFrame(f, end, "fewer than minProperties %d properties", *s.MinProperties)
				return
			}
		} else if s.MinItems != nil && f.index < *s.MinItems {
			t.failAtFrame(f, end, "array has %d items, fewer than minItems %d", f.index, *s.MinItems)
			return
		}
	}
}

// failAtFrame reports a failure of the container f that just closed at end.
func (t *tracker) failAtFrame(f tframe, end int, format string, args ...any) {
	p := t.pointer("")
	t.fail = &early{pointer: p, start: end - 1, end: end, msg: describe(p, fmt.Sprintf(format, args...))}
}

func (t *tracker) endScalar(k jsonsyntax.Kind, raw []byte, end int) {
	schemas := t.scalar
	t.scalar = nil
	if len(schemas) == 0 {
		return
	}
	if raw == nil {
		t.undecided = true
		return
	}
	start := end - len(raw)
	var val any
	var rat *big.Rat
	decoded, ratDone := false, false
	number := func() *big.Rat {
		if !ratDone {
			ratDone = true
			if n, ok := smallInt(raw); ok {
				rat = t.rat.SetInt64(n) // the common case, without parsing text
				return rat
			}
			if !exactOK(raw) {
				t.undecided = true
				return nil
			}
			if _, ok := t.rat.SetString(string(raw)); !ok {
				t.undecided = true
				return nil
			}
			rat = &t.rat
		}
		return rat
	}
	for _, s := range schemas {
		switch k {
		case jsonsyntax.KindNumber:
			if t.mask(s)&tNumber == 0 && t.mask(s)&tInteger != 0 {
				if r := number(); r != nil && !r.IsInt() {
					t.failAt(start, end, "", "got number %s, want integer", raw)
					return
				}
			}
			if s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil {
				if r := number(); r != nil {
					if msg := numRange(s, r); msg != "" {
						t.failAt(start, end, "", "%s: got %s", msg, raw)
						return
					}
				}
			}
		case jsonsyntax.KindString:
			if s.MinLength != nil || s.MaxLength != nil || s.Pattern != nil {
				str := decodeKey(raw)
				n := utf8.RuneCountInString(str)
				if s.MinLength != nil && n < *s.MinLength {
					t.failAt(start, end, "", "string of length %d is shorter than minLength %d", n, *s.MinLength)
					return
				}
				if s.MaxLength != nil && n > *s.MaxLength {
					t.failAt(start, end, "", "string of length %d is longer than maxLength %d", n, *s.MaxLength)
					return
				}
				if s.Pattern != nil && !s.Pattern.MatchString(str) {
					t.failAt(start, end, "", "%s does not match pattern %q", clipRaw(raw), s.Pattern.String())
					return
				}
			}
		}
		if s.Enum == nil && s.Const == nil {
			continue
		}
		if !decoded {
			var ok bool
			val, ok = scalarValue(k, raw)
			if !ok {
				t.undecided = true
				return
			}
			decoded = true
		}
		if s.Enum != nil {
			found, ok := inValues(val, s.Enum.Values)
			if !ok {
				t.undecided = true
			} else if !found {
				t.failAt(start, end, "", "value %s is not one of enum %s", clipRaw(raw), short(s.Enum.Values))
				return
			}
		}
		if s.Const != nil {
			found, ok := inValues(val, []any{*s.Const})
			if !ok {
				t.undecided = true
			} else if !found {
				t.failAt(start, end, "", "value %s does not equal const %s", clipRaw(raw), short([]any{*s.Const}))
				return
			}
		}
	}
}

func clipRaw(raw []byte) string {
	if len(raw) > 60 {
		return string(raw[:57]) + "..."
	}
	return string(raw)
}

// numRange checks the numeric range keywords, returning what failed.
func numRange(s *js.Schema, r *big.Rat) string {
	switch {
	case s.Minimum != nil && r.Cmp(s.Minimum) < 0:
		return "less than minimum " + s.Minimum.RatString()
	case s.Maximum != nil && r.Cmp(s.Maximum) > 0:
		return "greater than maximum " + s.Maximum.RatString()
	case s.ExclusiveMinimum != nil && r.Cmp(s.ExclusiveMinimum) <= 0:
		return "not greater than exclusiveMinimum " + s.ExclusiveMinimum.RatString()
	case s.ExclusiveMaximum != nil && r.Cmp(s.ExclusiveMaximum) >= 0:
		return "not less than exclusiveMaximum " + s.ExclusiveMaximum.RatString()
	}
	return ""
}

func scalarValue(k jsonsyntax.Kind, raw []byte) (any, bool) {
	switch k {
	case jsonsyntax.KindNull:
		return nil, true
	case jsonsyntax.KindBool:
		return raw[0] == 't', true
	case jsonsyntax.KindNumber:
		return json.Number(raw), true
	case jsonsyntax.KindString:
		return decodeKey(raw), true
	}
	return nil, false
}

// inValues reports whether scalar v equals one of vals, with JSON Schema
// equality (numbers compare by value: 1 == 1.0), and whether that could
// be decided (a number too large to compare exactly cannot).
func inValues(v any, vals []any) (found, decided bool) {
	for _, w := range vals {
		switch v := v.(type) {
		case nil:
			if w == nil {
				return true, true
			}
		case bool:
			if b, ok := w.(bool); ok && b == v {
				return true, true
			}
		case string:
			if s, ok := w.(string); ok && s == v {
				return true, true
			}
		case json.Number:
			if valueMask(w)&tNumber == 0 {
				continue
			}
			a, ok1 := parseRat(string(v))
			b, ok2 := parseRat(fmt.Sprint(w))
			if !ok1 || !ok2 {
				return false, false
			}
			if a.Cmp(b) == 0 {
				return true, true
			}
		}
	}
	return false, true
}

// smallInt parses a JSON integer of at most 18 digits.
func smallInt(raw []byte) (int64, bool) {
	neg := len(raw) > 0 && raw[0] == '-'
	digits := raw
	if neg {
		digits = raw[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// exactOK reports whether a JSON number's exponent is small enough to
// parse exactly (see parseRat).
func exactOK(raw []byte) bool {
	for i, c := range raw {
		if c == 'e' || c == 'E' {
			exp := raw[i+1:]
			if len(exp) > 0 && (exp[0] == '+' || exp[0] == '-') {
				exp = exp[1:]
			}
			return len(exp) <= 4
		}
	}
	return true
}

// parseRat parses a JSON number exactly, refusing exponents whose
// magnitude would make big.Rat allocate without bound (such numbers are
// left to the full validation at Close).
func parseRat(s string) (*big.Rat, bool) {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp := strings.TrimLeft(s[i+1:], "+-")
		if len(exp) > 4 {
			return nil, false
		}
	}
	return new(big.Rat).SetString(s)
}
