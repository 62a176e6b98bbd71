package chunkscan

import (
	"encoding/json"
	"testing"
)

var memberCases = []struct {
	name, body string
	members    []string // name=value, in order; nil for an invalid body
}{
	{"empty", `{}`, []string{}},
	{"spaced", " { \"a\" : 1 , \"b\" : [ 2 ] } ", []string{`a=1`, `b=[ 2 ]`}},
	{"nested", `{"o":{"k":"]}"},"s":"x\"y"}`, []string{`o={"k":"]}"}`, `s="x\"y"`}},
	{"escaped name", `{"a\u0062":true}`, []string{`a\u0062=true`}},
	{"not an object", `[1]`, nil},
	{"trailing data", `{"a":1} x`, nil},
	{"trailing comma", `{"a":1,}`, nil},
	{"bad number", `{"a":01}`, nil},
	{"truncated", `{"a":`, nil},
	{"empty input", ``, nil},
}

func TestMembers(t *testing.T) {
	for _, c := range memberCases {
		t.Run(c.name, func(t *testing.T) {
			got := []string{}
			err := Members([]byte(c.body), func(name []byte, _ bool, value []byte) {
				got = append(got, string(name)+"="+string(value))
			})
			if c.members == nil {
				if err == nil {
					t.Fatalf("Members(%q) accepted an invalid body: %q", c.body, got)
				}
				return
			}
			if err != nil || len(got) != len(c.members) {
				t.Fatalf("Members(%q) = %q, %v; want %q", c.body, got, err, c.members)
			}
			for i := range got {
				if got[i] != c.members[i] {
					t.Fatalf("member %d = %q, want %q", i, got[i], c.members[i])
				}
			}
		})
	}
}

// FuzzMembers checks that Members accepts exactly the JSON objects
// encoding/json accepts, and gives each value as a valid JSON value.
func FuzzMembers(f *testing.F) {
	for _, c := range memberCases {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		var obj map[string]json.RawMessage
		want := json.Unmarshal(p, &obj) == nil && obj != nil
		err := Members(p, func(_ []byte, _ bool, value []byte) {
			if !json.Valid(value) {
				t.Fatalf("value %q of %q is not JSON", value, p)
			}
		})
		if (err == nil) != want {
			t.Fatalf("Members(%q) error %v; encoding/json accepts it: %v", p, err, want)
		}
	})
}
