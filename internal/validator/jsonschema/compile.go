package jsonschema

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	js "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Options change how a schema is compiled; they are part of the cache key.
type Options struct {
	// AssertFormat makes "format" an assertion (draft 2020-12 treats it as
	// an annotation by default; draft 7 validators may do either).
	AssertFormat bool
}

// Compiled is a compiled schema, safe for concurrent use.
type Compiled struct {
	// Schema is the compiled root schema.
	Schema *js.Schema
	// Draft is the draft version the root was compiled with (7, 2020).
	Draft int

	// Decisive is true when every subschema uses only keywords the
	// streaming tracker checks completely; the tracker's verdict is then
	// the schema's verdict and Close skips the full validation.
	Decisive bool

	// nodes holds what the tracker derives from each subschema it can
	// reach, built once at compile time and read-only afterwards.
	nodes map[*js.Schema]*node
	root  []*js.Schema // the root's expansion
}

// schemaURL is the base URL a request's schema is compiled under. The
// .invalid TLD never resolves; nothing is ever fetched.
const schemaURL = "https://schema.aegis.invalid/response.json"

// errNoRemote is returned by the loader: Aegis never fetches or reads a
// $ref target (a request's schema must not make the gateway read local
// files or call the network).
var errNoRemote = errors.New("external $ref is not allowed (only refs inside the schema and the standard metaschemas)")

type denyLoader struct{}

func (denyLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("load %s: %w", url, errNoRemote)
}

// Cache is a bounded LRU of compiled schemas keyed by the SHA-256 of the
// schema text and the options. Compile errors are cached too, so a bad
// schema repeated on every request is not recompiled. It is safe for
// concurrent use.
type Cache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[[32]byte]*list.Element
	// Loader, when set, resolves external $refs (tests use it to serve the
	// JSON-Schema-Test-Suite remotes); nil refuses them.
	Loader js.URLLoader
}

type entry struct {
	key [32]byte
	c   *Compiled
	err error
}

// NewCache returns a cache holding at most max schemas (max <= 0 means 512).
func NewCache(max int) *Cache {
	if max <= 0 {
		max = 512
	}
	return &Cache{max: max, ll: list.New(), items: make(map[[32]byte]*list.Element)}
}

// DefaultCache is the process-wide cache json_schema and tool_call use.
var DefaultCache = NewCache(512)

// Len returns the number of cached schemas.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Compile returns the compiled schema for the given schema text, from the
// cache when it has been compiled before.
func (c *Cache) Compile(schema []byte, opt Options) (*Compiled, error) {
	h := sha256.New()
	if opt.AssertFormat {
		h.Write([]byte{1})
	} else {
		h.Write([]byte{0})
	}
	h.Write(schema)
	var key [32]byte
	h.Sum(key[:0])

	c.mu.Lock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		e := el.Value.(*entry)
		c.mu.Unlock()
		return e.c, e.err
	}
	c.mu.Unlock()

	// Compile outside the lock: two goroutines may compile the same
	// schema at once; the second result simply replaces the first.
	comp, err := compile(schema, opt, c.Loader)

	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		e := el.Value.(*entry)
		return e.c, e.err
	}
	c.items[key] = c.ll.PushFront(&entry{key: key, c: comp, err: err})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.items, old.Value.(*entry).key)
	}
	return comp, err
}

func compile(schema []byte, opt Options, loader js.URLLoader) (*Compiled, error) {
	doc, err := js.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	c := js.NewCompiler()
	c.DefaultDraft(js.Draft2020)
	if loader == nil {
		loader = denyLoader{}
	}
	c.UseLoader(loader)
	if opt.AssertFormat {
		c.AssertFormat()
	}
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("add schema: %w", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", explain(err))
	}
	comp := &Compiled{Schema: s, Draft: s.DraftVersion, Decisive: decisive(s, map[*js.Schema]bool{})}
	comp.nodes = make(map[*js.Schema]*node)
	comp.addNodes(s)
	comp.root = comp.node(s).exp
	return comp, nil
}

// Violation is one way an instance breaks a schema.
type Violation struct {
	// Pointer is the JSON pointer of the failing value ("" for the root).
	Pointer string
	// Start and End are the byte span of the failing value in the
	// instance text.
	Start, End int
	// Message says what is wrong.
	Message string
}

// maxViolations bounds the violations reported for one document.
const maxViolations = 16

var printer = message.NewPrinter(language.English)

// Validate validates a complete JSON document (doc must be valid JSON;
// a parse error is returned as a single violation at the root).
func (c *Compiled) Validate(doc []byte) []Violation {
	inst, err := js.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return []Violation{{Start: 0, End: len(doc), Message: "not valid JSON: " + err.Error()}}
	}
	err = c.Schema.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *js.ValidationError
	if !errors.As(err, &ve) {
		return []Violation{{Start: 0, End: len(doc), Message: err.Error()}}
	}
	var leaves []*js.ValidationError
	collect(ve, &leaves)
	out := make([]Violation, 0, len(leaves))
	seen := map[string]bool{}
	for _, l := range leaves {
		ptr := pointer(l.InstanceLocation)
		msg := l.ErrorKind.LocalizedString(printer) + branches(l)
		if seen[ptr+"\x00"+msg] {
			continue
		}
		seen[ptr+"\x00"+msg] = true
		start, end := Locate(doc, l.InstanceLocation)
		out = append(out, Violation{Pointer: ptr, Start: start, End: end, Message: describe(ptr, msg)})
		if len(out) == maxViolations {
			break
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

func describe(ptr, msg string) string {
	if ptr == "" {
		return "at the root: " + msg
	}
	return "at " + strconv.Quote(ptr) + ": " + msg
}

// collect gathers the errors worth reporting: leaves, except that an
// anyOf / oneOf / not failure is reported as itself (its branches'
// errors would only confuse).
func collect(e *js.ValidationError, out *[]*js.ValidationError) {
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf, *kind.Not:
		*out = append(*out, e)
		return
	}
	if len(e.Causes) == 0 {
		if _, ok := e.ErrorKind.(*kind.Schema); ok {
			return
		}
		*out = append(*out, e)
		return
	}
	for _, c := range e.Causes {
		collect(c, out)
	}
}

// pointer renders instance location tokens as a JSON pointer.
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return ""
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

// explain names what is wrong in a schema that breaks its metaschema: the
// library's error says only that it is invalid; the causes say where.
func explain(err error) error {
	var se *js.SchemaValidationError
	var ve *js.ValidationError
	if !errors.As(err, &se) || !errors.As(se.Err, &ve) {
		return err
	}
	var leaves []*js.ValidationError
	collect(ve, &leaves)
	var parts []string
	for _, l := range leaves {
		parts = append(parts, describe(pointer(l.InstanceLocation), l.ErrorKind.LocalizedString(printer)))
		if len(parts) == 3 {
			break
		}
	}
	if len(parts) == 0 {
		return err
	}
	return fmt.Errorf("schema is not a valid JSON Schema: %s: %w", strings.Join(parts, "; "), err)
}

// branches summarises why each alternative of a failed anyOf / oneOf
// failed (the first few), so "anyOf failed" says what was wrong.
func branches(e *js.ValidationError) string {
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
	default:
		return ""
	}
	var parts []string
	for _, c := range e.Causes {
		var leaves []*js.ValidationError
		collect(c, &leaves)
		for _, l := range leaves {
			m := l.ErrorKind.LocalizedString(printer)
			if p := pointer(l.InstanceLocation); p != pointer(e.InstanceLocation) {
				m = p + ": " + m
			}
			parts = append(parts, m)
			break
		}
		if len(parts) == 3 {
			break
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
