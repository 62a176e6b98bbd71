package jsonschema

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

const personSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer", "minimum": 0},
    "role": {"enum": ["admin", "user"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}
  },
  "required": ["name", "age"],
  "additionalProperties": false
}`

type schemaCase struct {
	name   string
	schema string
	doc    string
	valid  bool
	// early is the byte offset of the early failure (before Close), or
	// -1 when the failure is only found at Close (or there is none).
	early int
	path  string
}

var cases = []schemaCase{
	{"person ok", personSchema, `{"name":"Ada","age":36,"role":"admin","tags":["x"],"address":{"city":"London"}}`, true, -1, ""},
	{"person minimal", personSchema, `{"name":"Ada","age":0}`, true, -1, ""},
	{"person whitespace", personSchema, "{\n  \"name\": \"Ada\",\n  \"age\": 1.0\n}\n", true, -1, ""},
	{"unknown key", personSchema, `{"name":"Ada","nick":"A","age":1}`, false, 14, "/nick"},
	{"wrong type string for int", personSchema, `{"name":"Ada","age":"36"}`, false, 20, "/age"},
	{"fractional for integer", personSchema, `{"name":"Ada","age":3.5}`, false, 20, "/age"},
	{"enum mismatch", personSchema, `{"name":"Ada","age":1,"role":"root"}`, false, 29, "/role"},
	{"enum container", personSchema, `{"name":"Ada","age":1,"role":{"x":1}}`, false, 29, "/role"},
	{"missing required", personSchema, `{"name":"Ada"}`, false, 13, ""},
	{"nested missing required", personSchema, `{"name":"Ada","age":1,"address":{}}`, false, 33, "/address"},
	{"nested unknown key", personSchema, `{"name":"Ada","age":1,"address":{"city":"X","zip":"1"}}`, false, 44, "/address/zip"},
	{"array item type", personSchema, `{"name":"Ada","age":1,"tags":["a",2]}`, false, 34, "/tags/1"},
	{"too many items", personSchema, `{"name":"Ada","age":1,"tags":["a","b","c","d"]}`, false, 42, "/tags/3"},
	{"minimum", personSchema, `{"name":"Ada","age":-1}`, false, 20, "/age"},
	{"multipleOf only at close", `{"properties":{"n":{"multipleOf":3}}}`, `{"n":4}`, false, -1, "/n"},
	{"maxLength", `{"properties":{"s":{"maxLength":3}}}`, `{"s":"héllo"}`, false, 5, "/s"},
	{"minLength counts runes", `{"minLength":2}`, `"é"`, false, 0, ""},
	{"minLength ok runes", `{"maxLength":1}`, `"é"`, true, -1, ""},
	{"exclusiveMaximum", `{"items":{"exclusiveMaximum":10}}`, `[9.5,10]`, false, 5, "/1"},
	{"maxProperties", `{"maxProperties":1}`, `{"a":1,"b":2}`, false, 7, "/b"},
	{"minProperties", `{"properties":{"o":{"minProperties":1}}}`, `{"o":{}}`, false, 6, "/o"},
	{"uniqueItems only at close", `{"uniqueItems":true}`, `[1,1.0]`, false, -1, ""},
	{"duplicate key last wins", `{"properties":{"a":{"type":"integer"}},"additionalProperties":false}`, `{"a":1,"a":2}`, true, -1, ""},
	{"root wrong type", personSchema, `["Ada"]`, false, 0, ""},
	{"root scalar", personSchema, `"Ada"`, false, 0, ""},
	{"not json", personSchema, `Sure! {"name":"Ada"}`, false, 0, ""},
	{"const ok", `{"const": 42}`, `42.0`, true, -1, ""},
	{"const mismatch top-level number", `{"const": 42}`, `43`, false, -1, ""},
	{"const mismatch nested", `{"properties":{"v":{"const":"x"}}}`, `{"v":"y"}`, false, 5, "/v"},
	{"anyOf ok", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `"x"`, true, -1, ""},
	{"anyOf fails only at close", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `{"a":1}`, false, -1, ""},
	{"ref followed", `{"$defs":{"n":{"type":"integer"}},"properties":{"a":{"$ref":"#/$defs/n"}}}`, `{"a":"s"}`, false, 5, "/a"},
	{"allOf followed", `{"allOf":[{"properties":{"a":{"type":"integer"}}}]}`, `{"a":true}`, false, 5, "/a"},
	{"oneOf not followed early", `{"oneOf":[{"properties":{"a":{"type":"integer"}}},{"properties":{"a":{"type":"string"}}}]}`, `{"a":true}`, false, -1, ""},
	{"prefixItems", `{"prefixItems":[{"type":"string"},{"type":"number"}],"items":false}`, `["a",1,2]`, false, 7, "/2"},
	{"draft7 items tuple", `{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}],"additionalItems":false}`, `["a","b"]`, false, 5, "/1"},
	{"draft7 ref ignores siblings", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s","type":"integer"}}}`, `{"a":"x"}`, true, -1, ""},
	{"patternProperties", `{"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false}`, `{"x-a":"1","y":2}`, false, 11, "/y"},
	{"escaped key", `{"properties":{"a/b":{"type":"string"}},"additionalProperties":false}`, `{"a\/b":"ok"}`, true, -1, ""},
	{"format annotation only", `{"type":"string","format":"email"}`, `"not an email"`, true, -1, ""},
	{"pattern", `{"type":"string","pattern":"^[a-z]+$"}`, `"ABC"`, false, 0, ""},
	{"pattern nested", `{"items":{"type":"string","pattern":"^[a-z]+$"}}`, `["abc","ABC"]`, false, 7, "/1"},
	{"false schema property", `{"properties":{"a":false}}`, `{"a":1}`, false, 5, "/a"},
	{"tool args", `{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}`, `{"location":"Paris","unit":"celsius"}`, true, -1, ""},
	{"tool args bad unit", `{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}`, `{"location":"Paris","unit":"kelvin"}`, false, 27, "/unit"},
	{"number enum by value", `{"enum":[1,2]}`, `[1]`, false, 0, ""},
	{"nested number enum", `{"items":{"enum":[1,2]}}`, `[2.0,1e0,3]`, false, 9, "/2"},
}

func newFor(t testing.TB, schema string) func() validator.Validator {
	t.Helper()
	comp, err := DefaultCache.Compile([]byte(schema), Options{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return func() validator.Validator { return New(comp, nil) }
}

func TestSchemaTable(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			newFn := newFor(t, c.schema)
			fs := validatortest.SplitIndependent(t, newFn, c.doc)
			if (len(fs) == 0) != c.valid {
				t.Fatalf("findings %+v, want valid=%v", fs, c.valid)
			}
			// Early failure: present before Close exactly when expected.
			v := newFn()
			v.Write([]byte(c.doc))
			pre := v.Findings()
			if c.early >= 0 {
				if len(pre) == 0 {
					t.Fatalf("no early failure, want one at %d", c.early)
				}
				if pre[0].Start != c.early || pre[0].Path != c.path {
					t.Fatalf("early finding %+v, want start %d path %q", pre[0], c.early, c.path)
				}
			} else if len(pre) != 0 {
				t.Fatalf("unexpected early finding %+v", pre)
			}
			// An early failure must agree with the full validation.
			comp, _ := DefaultCache.Compile([]byte(c.schema), Options{})
			full := comp.Validate([]byte(c.doc))
			if c.valid != (len(full) == 0) && !strings.HasPrefix(c.name, "not json") {
				t.Fatalf("full validation %+v, want valid=%v", full, c.valid)
			}
			if !c.valid && c.early < 0 && c.path != "" && (len(full) == 0 || full[0].Pointer != c.path) {
				t.Fatalf("full violations %+v, want path %q", full, c.path)
			}
		})
	}
}

func TestViolationSpan(t *testing.T) {
	doc := `{"name":"Ada","age":-1}`
	comp, _ := DefaultCache.Compile([]byte(personSchema), Options{})
	vs := comp.Validate([]byte(doc))
	if len(vs) != 1 || vs[0].Pointer != "/age" || doc[vs[0].Start:vs[0].End] != "-1" {
		t.Fatalf("violations %+v", vs)
	}
}

func TestCompileErrors(t *testing.T) {
	for name, s := range map[string]string{
		"not json":      `{"type":`,
		"bad type":      `{"type":"strin"}`,
		"bad regex":     `{"pattern":"(?<=x)"}`,
		"remote ref":    `{"$ref":"http://example.com/s.json"}`,
		"file ref":      `{"$ref":"file:///etc/passwd"}`,
		"unknown draft": `{"$schema":"http://example.com/my-draft"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := DefaultCache.Compile([]byte(s), Options{}); err == nil {
				t.Fatalf("schema %s compiled", s)
			} else {
				t.Log(err)
			}
		})
	}
}

func TestCacheBounded(t *testing.T) {
	c := NewCache(3)
	for i := range 10 {
		s := `{"maxLength":` + strings.Repeat("1", i+1) + `}`
		a, err := c.Compile([]byte(s), Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := c.Compile([]byte(s), Options{})
		if a != b {
			t.Fatal("second compile of the same schema not served from the cache")
		}
	}
	if c.Len() != 3 {
		t.Fatalf("cache holds %d, want 3", c.Len())
	}
}

func TestCacheConcurrent(t *testing.T) {
	c := NewCache(4)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				s := fmt.Sprintf(`{"maxItems":%d}`, (g+i)%6)
				comp, err := c.Compile([]byte(s), Options{})
				if err != nil {
					t.Error(err)
					return
				}
				v := New(comp, nil)
				v.Write([]byte(`[1,2,3]`))
				v.Close()
			}
		}()
	}
	wg.Wait()
	if c.Len() > 4 {
		t.Fatalf("cache grew to %d", c.Len())
	}
}

func TestSpec(t *testing.T) {
	spec, ok := testRegistry.Lookup(Name)
	if !ok {
		t.Fatal("not registered")
	}
	cfg := spec.Config()
	dec := yaml.NewDecoder(strings.NewReader(spec.Example))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		t.Fatalf("Example: %v", err)
	}
	if v, err := spec.New(cfg, &validator.Request{}); v != nil || err != nil {
		t.Fatalf("applies without a schema: %v %v", v, err)
	}
	req := &validator.Request{ResponseFormat: &validator.ResponseFormat{Type: "json_schema", Schema: []byte(personSchema)}}
	if v, err := spec.New(cfg, req); v == nil || err != nil {
		t.Fatalf("New: %v %v", v, err)
	}
	bad := &validator.Request{ResponseFormat: &validator.ResponseFormat{Type: "json_schema", Schema: []byte(`{"type":7}`)}}
	if _, err := spec.New(cfg, bad); err == nil || !strings.Contains(err.Error(), "json_schema") {
		t.Fatalf("bad schema error %v", err)
	}
}

func FuzzJSONSchema(f *testing.F) {
	for i, c := range cases {
		f.Add(i, c.doc)
	}
	f.Fuzz(func(t *testing.T, i int, doc string) {
		if i < 0 {
			i = -i
		}
		c := cases[i%len(cases)]
		comp, err := DefaultCache.Compile([]byte(c.schema), Options{})
		if err != nil {
			t.Fatal(err)
		}
		v := New(comp, nil)
		v.Write([]byte(doc))
		early := len(v.Findings()) > 0 && v.Findings()[0].Reason == validator.ReasonSchemaViolation
		v.Close()
		// Soundness: an early schema failure is always a real one.
		if early && len(comp.Validate([]byte(doc))) == 0 {
			t.Fatalf("early failure %+v on a document the full validator accepts", v.Findings())
		}
		// Completeness: a pass (decided by the tracker alone for a
		// decisive schema) must be a pass of the full validation.
		if len(v.Findings()) == 0 && len(comp.Validate([]byte(doc))) != 0 {
			t.Fatalf("passed %q but the full validator rejects it: %+v", doc, comp.Validate([]byte(doc)))
		}
		// Split independence.
		w := New(comp, nil)
		for j := 0; j < len(doc); j += 3 {
			w.Write([]byte(doc[j:min(j+3, len(doc))]))
		}
		w.Close()
		if len(w.Findings()) != len(v.Findings()) || len(v.Findings()) > 0 && w.Findings()[0] != v.Findings()[0] {
			t.Fatalf("split findings %+v vs whole %+v", w.Findings(), v.Findings())
		}
	})
}
