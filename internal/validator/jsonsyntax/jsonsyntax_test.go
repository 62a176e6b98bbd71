package jsonsyntax

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

type syntaxCase struct {
	name string
	in   string
	kind ErrorKind // ErrNone for valid
	at   int       // expected offset when invalid
}

var cases = []syntaxCase{
	// benign
	{"object", `{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, ErrNone, 0},
	{"empty object", `{}`, ErrNone, 0},
	{"empty array", `[]`, ErrNone, 0},
	{"nested empty", `{"a":{},"b":[],"c":[{}]}`, ErrNone, 0},
	{"whitespace around", " \n\t{ \"a\" : 1 } \r\n", ErrNone, 0},
	{"top string", `"hello"`, ErrNone, 0},
	{"top number", `-12.5e+3`, ErrNone, 0},
	{"top zero", `0`, ErrNone, 0},
	{"top true", `true`, ErrNone, 0},
	{"top null", ` null `, ErrNone, 0},
	{"numbers", `[0,-0,1.5,1e5,1E-5,-0.0e0,123456789012345678901234567890]`, ErrNone, 0},
	{"escapes", `{"s":"a\"b\\c\/d\b\f\n\r\t\u00e9\uD83D\uDE00"}`, ErrNone, 0},
	{"utf8", `{"s":"héllo wörld 日本語 😀"}`, ErrNone, 0},
	{"prose inside string", `{"answer":"Sure! Here is the JSON, with 'quotes', commas, and {braces}."}`, ErrNone, 0},
	{"deep ok", strings.Repeat("[", 128) + strings.Repeat("]", 128), ErrNone, 0},
	{"tool args", `{"location":"Paris, FR","unit":"celsius","days":3}`, ErrNone, 0},
	{"array of objects", `[{"id":1,"tags":["x","y"]},{"id":2,"tags":[]}]`, ErrNone, 0},

	// broken
	{"trailing comma object", `{"a":1,}`, ErrTrailingComma, 7},
	{"trailing comma array", `[1,2, ]`, ErrTrailingComma, 6},
	{"single quotes value", `{"a":'b'}`, ErrSingleQuote, 5},
	{"single quotes key", `{'a':1}`, ErrSingleQuote, 1},
	{"NaN", `{"a":NaN}`, ErrNonFinite, 5},
	{"Infinity", `[Infinity]`, ErrNonFinite, 1},
	{"minus Infinity", `[-Infinity]`, ErrNonFinite, 2},
	{"unterminated string", `{"a":"abc`, ErrUnterminated, 9},
	{"unclosed object", `{"a":1`, ErrUnterminated, 6},
	{"unclosed array", `[1,[2]`, ErrUnterminated, 6},
	{"prose before", `Here is the JSON: {"a":1}`, ErrProseBefore, 0},
	{"prose before t-word", `the answer {"a":1}`, ErrProseBefore, 1},
	{"prose before n-word", `no.`, ErrProseBefore, 1},
	{"fence", "```json\n{\"a\":1}\n```", ErrFence, 0},
	{"second document", `{"a":1} {"b":2}`, ErrSecondValue, 8},
	{"prose after", `{"a":1} hope this helps`, ErrSecondValue, 8},
	{"invalid escape", `{"a":"\x"}`, ErrBadEscape, 7},
	{"bad unicode escape", `{"a":"\u12G4"}`, ErrBadEscape, 10},
	{"raw newline in string", "{\"a\":\"line1\nline2\"}", ErrControlChar, 11},
	{"raw tab in string", "[\"a\tb\"]", ErrControlChar, 3},
	{"leading zero", `[01]`, ErrBadNumber, 2},
	{"dot without digits", `[1.]`, ErrBadNumber, 3},
	{"leading dot", `[.5]`, ErrBadNumber, 1},
	{"plus sign", `[+1]`, ErrBadNumber, 1},
	{"bad exponent", `[1e]`, ErrBadNumber, 3},
	{"truncated literal", `[tru]`, ErrBadLiteral, 4},
	{"truncated literal at end", `[nul`, ErrUnterminated, 4},
	{"Python True", `{"a":True}`, ErrBadLiteral, 5},
	{"Python None", `{"a":None}`, ErrNonFinite, 5},
	{"unquoted key", `{a:1}`, ErrUnquotedKey, 1},
	{"missing colon", `{"a" 1}`, ErrUnexpected, 5},
	{"missing comma", `[1 2]`, ErrUnexpected, 3},
	{"mismatched close", `[1}`, ErrUnexpected, 2},
	{"empty", ``, ErrEmpty, 0},
	{"only space", "  \n", ErrEmpty, 3},
	{"too deep", strings.Repeat("[", 129), ErrTooDeep, 128},
	{"bad utf8", "[\"a\xffb\"]", ErrBadUTF8, 3},
	{"surrogate utf8", "[\"\xed\xa0\x80\"]", ErrBadUTF8, 3},
	{"comment", `{"a":1 // note` + "\n}", ErrUnexpected, 7},
	{"value after colon missing", `{"a":}`, ErrUnexpected, 5},
	{"double comma", `[1,,2]`, ErrUnexpected, 3},
	{"number then letter", `[12a]`, ErrUnexpected, 3},
	{"truncated number", `[1.`, ErrUnterminated, 3},
}

func TestScannerTable(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check([]byte(c.in))
			if c.kind == ErrNone {
				if err != nil {
					t.Fatalf("Check(%q) = %v, want valid", c.in, err)
				}
			} else {
				if err == nil {
					t.Fatalf("Check(%q) = valid, want %v at %d", c.in, c.kind, c.at)
				}
				if err.Kind != c.kind || err.Offset != c.at {
					t.Fatalf("Check(%q) = %v (%v at %d), want %v at %d", c.in, err, err.Kind, err.Offset, c.kind, c.at)
				}
			}
			// Agreement with encoding/json on validity (it has no depth
			// limit below 10000 and accepts the same grammar).
			if c.kind != ErrTooDeep && stdValid([]byte(c.in)) != (c.kind == ErrNone) {
				t.Fatalf("encoding/json disagrees on %q", c.in)
			}
		})
	}
}

// stdValid is encoding/json's validity plus the UTF-8 validity that JSON
// (RFC 8259) requires and encoding/json does not check.
func stdValid(b []byte) bool { return json.Valid(b) && utf8.Valid(b) }

func newValidator() validator.Validator { return New(0) }

func TestValidatorSplitIndependent(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := validatortest.SplitIndependent(t, newValidator, c.in)
			if (len(fs) == 0) != (c.kind == ErrNone) {
				t.Fatalf("findings %+v, want kind %v", fs, c.kind)
			}
			if len(fs) == 1 {
				f := fs[0]
				if f.Start != c.at || f.Reason != validator.ReasonInvalidJSON || f.Check != Name {
					t.Fatalf("finding %+v, want start %d", f, c.at)
				}
				if (f.Hint == validator.ActionFixSyntax) != c.kind.Repairable() {
					t.Fatalf("hint %q for kind %v", f.Hint, c.kind)
				}
			}
		})
	}
}

func TestSettledHoldsUntilComplete(t *testing.T) {
	v := New(0)
	v.Write([]byte(`{"a":[1,2`))
	if s := v.Settled(); s != 0 {
		t.Fatalf("Settled mid-document = %d, want 0", s)
	}
	v.Write([]byte(`]}`))
	if s := v.Settled(); s != 11 {
		t.Fatalf("Settled after document = %d, want 11", s)
	}
	v.Write([]byte("\n"))
	v.Close()
	if s := v.Settled(); s != 12 || len(v.Findings()) != 0 {
		t.Fatalf("after Close Settled = %d findings %v", s, v.Findings())
	}
	// A top-level number is not complete until something ends it.
	n := New(0)
	n.Write([]byte("12"))
	if n.Settled() != 0 {
		t.Fatal("top-level number settled before its end")
	}
	n.Close()
	if n.Settled() != 2 {
		t.Fatalf("number after Close settled %d", n.Settled())
	}
}

func TestSpec(t *testing.T) {
	spec, ok := testRegistry.Lookup(Name)
	if !ok {
		t.Fatal("json_syntax not registered")
	}
	cfg := spec.Config()
	dec := yaml.NewDecoder(strings.NewReader(spec.Example))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		t.Fatalf("Example does not decode: %v", err)
	}
	if !cfg.(*Config).Always || cfg.(*Config).MaxDepth != 64 {
		t.Fatalf("decoded %+v", cfg)
	}
	plain := &validator.Request{}
	if v, err := spec.New(spec.Config(), plain); v != nil || err != nil {
		t.Fatalf("applies to a plain request: %v %v", v, err)
	}
	jsonReq := &validator.Request{ResponseFormat: &validator.ResponseFormat{Type: "json_object"}}
	if v, err := spec.New(spec.Config(), jsonReq); v == nil || err != nil {
		t.Fatalf("does not apply to json_object: %v %v", v, err)
	}
	if v, err := spec.New(cfg, plain); v == nil || err != nil {
		t.Fatalf("always: true does not apply: %v %v", v, err)
	}
	if _, err := spec.New(&Config{MaxDepth: -1}, jsonReq); err == nil {
		t.Fatal("negative max_depth accepted")
	}
}

func TestRepair(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{"valid unchanged", `{"a":1}`, `{"a":1}`, true},
		{"trailing comma", `{"a":[1,2,],}`, `{"a":[1,2]}`, true},
		{"single quotes", `{'a':'it''s "x"'}`, ``, false},
		{"single quotes simple", `{'a':'say "hi"','b':'don\'t'}`, `{"a":"say \"hi\"","b":"don't"}`, true},
		{"fence", "```json\n{\"a\":1}\n```\n", `{"a":1}`, true},
		{"fence no lang", "```\n[1,2]\n```", `[1,2]`, true},
		{"cut in string", `{"a":"hel`, `{"a":"hel"}`, true},
		{"cut after colon", `{"a":`, `{"a":null}`, true},
		{"cut after key", `{"a":1,"b"`, `{"a":1,"b":null}`, true},
		{"cut after comma", `[1,2,`, `[1,2]`, true},
		{"cut nested", `{"a":[{"b":1`, `{"a":[{"b":1}]}`, true},
		{"prose not repaired", `Here: {"a":1}`, ``, false},
		{"NaN not repaired", `{"a":NaN}`, ``, false},
		{"string value with comma brace", `{"a":"x,}"}`, `{"a":"x,}"}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Repair([]byte(tc.in))
			if ok != tc.ok || (ok && string(got) != tc.want) {
				t.Fatalf("Repair(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// recorder collects Handler events as text, to check the structure.
type recorder struct{ b strings.Builder }

func (r *recorder) BeginValue(k Kind, off int) { r.b.WriteString("<" + k.String()) }
func (r *recorder) Key(raw []byte, s, e int)   { r.b.WriteString(" key=" + string(raw)) }
func (r *recorder) EndValue(k Kind, raw []byte, end int) {
	r.b.WriteString(" " + string(raw) + ">")
}

func TestHandlerEvents(t *testing.T) {
	in := `{"a":[1,"x",true],"b":null,"c":{}}`
	want := `<object key="a"<array<number 1><string "x"><boolean true> > key="b"<null null> key="c"<object > >`
	for _, split := range []int{1, 3, len(in)} {
		r := &recorder{}
		s := NewScanner(0, r)
		for i := 0; i < len(in); i += split {
			s.Write([]byte(in[i:min(i+split, len(in))]))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if r.b.String() != want {
			t.Fatalf("split %d events\n got %s\nwant %s", split, r.b.String(), want)
		}
	}
}

func FuzzJSONSyntax(f *testing.F) {
	for _, c := range cases {
		f.Add(c.in, uint8(3))
	}
	f.Fuzz(func(t *testing.T, in string, split uint8) {
		b := []byte(in)
		err := Check(b)
		depthOK := bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) <= DefaultMaxDepth
		if depthOK && (err == nil) != stdValid(b) {
			t.Fatalf("Check(%q) = %v but encoding/json Valid = %v", in, err, stdValid(b))
		}
		// Split independence of the error offset and kind.
		n := int(split%17) + 1
		s := NewScanner(0, nil)
		for i := 0; i < len(b); i += n {
			s.Write(b[i:min(i+n, len(b))])
		}
		err2 := s.Close()
		if (err == nil) != (err2 == nil) || err != nil && (err.Offset != err2.Offset || err.Kind != err2.Kind) {
			t.Fatalf("split %d: %v vs whole %v", n, err2, err)
		}
		if out, ok := Repair(b); ok && !json.Valid(out) {
			t.Fatalf("Repair(%q) = %q, claimed valid", in, out)
		}
	})
}

var benchDoc = []byte(`{"id":"chatcmpl-123","items":[{"name":"Widget","price":12.5,"tags":["a","b"],"ok":true},` +
	`{"name":"Gadget \"pro\"","price":-3e2,"tags":[],"ok":false,"note":null}],"summary":"Two items, one with a quoted name; total is 9.5 units.","count":2}`)

// BenchmarkChunk16 measures one Write of a ~16-byte chunk (about 4 tokens),
// the per-chunk cost on the streaming hot path.
func BenchmarkChunk16(b *testing.B) {
	doc := bytes.Repeat(benchDoc[1:len(benchDoc)-1], 1)
	doc = append(append([]byte(`{"a":[`), bytes.Repeat(append([]byte(`{`), append(doc, '}', ',')...), 64)...), `{}]}`...)
	v := New(0)
	off := 0
	b.SetBytes(16)
	b.ReportAllocs()
	for b.Loop() {
		if off+16 > len(doc) {
			v = New(0)
			off = 0
		}
		v.Write(doc[off : off+16])
		off += 16
	}
}

// BenchmarkWhole measures throughput over a whole document.
func BenchmarkWhole(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	b.ReportAllocs()
	for b.Loop() {
		v := New(0)
		v.Write(benchDoc)
		v.Close()
		if len(v.Findings()) != 0 {
			b.Fatal(v.Findings())
		}
	}
}

// BenchmarkEncodingJSONValid is the baseline: the standard library's
// non-incremental json.Valid over the same document.
func BenchmarkEncodingJSONValid(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		if !json.Valid(benchDoc) {
			b.Fatal("invalid")
		}
	}
}

// testRegistry holds the checks this package's tests look up.
var testRegistry = func() *validator.Registry {
	r := &validator.Registry{}
	Register(r)
	return r
}()
