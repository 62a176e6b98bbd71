package gateway

import (
	"bytes"
	"encoding/json"
	"testing"
)

// bodySplitCases are bodies whose decoding decodeBody must give exactly as
// json.Unmarshal does: members, errors and their text.
var bodySplitCases = []struct{ name, body string }{
	{"empty object", `{}`},
	{"spaced empty object", " \n{ \t}\r\n"},
	{"chat", `{"messages":[{"role":"user","content":"Tell me a story."}],"stream":true,"temperature":0,"max_tokens":200}`},
	{"spaces around members", ` { "a" : 1 , "b" :[ 1 , {"c":"}"} ] , "d": "x\"]}" } `},
	{"literals and numbers", `{"t":true,"f":false,"n":null,"i":-12,"e":1.5e+3}`},
	{"nested brackets in strings", `{"s":"[{","o":{"k":"]}"},"a":["\\",{}]}`},
	{"duplicate member keeps the last", `{"n":1,"n":2}`},
	{"escaped name", `{"mod\u0065l":"m"}`},
	{"non-ASCII name", `{"modèle":"m"}`},
	{"invalid UTF-8 name", "{\"m\xffl\":1}"},
	{"case variants", `{"model":"a","Model":"b"}`},
	{"not an object", `[1,2]`},
	{"null", `null`},
	{"string", `"x"`},
	{"truncated", `{"a":1`},
	{"trailing garbage", `{"a":1}x`},
	{"missing colon", `{"a" 1}`},
	{"trailing comma", `{"a":1,}`},
	{"empty", ``},
}

func checkDecodeBody(t *testing.T, raw []byte) {
	t.Helper()
	var want rawBody
	wantErr := json.Unmarshal(raw, &want)
	got, err := decodeBody(raw)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("decodeBody(%q): error %v, json.Unmarshal: %v", raw, err, wantErr)
	}
	if (got == nil) != (want == nil) || len(got) != len(want) {
		t.Fatalf("decodeBody(%q) = %q, json.Unmarshal: %q", raw, got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !bytes.Equal(g, v) {
			t.Fatalf("decodeBody(%q)[%q] = %q, json.Unmarshal: %q", raw, k, g, v)
		}
	}
}

func TestDecodeBodyMatchesJSON(t *testing.T) {
	for _, c := range bodySplitCases {
		t.Run(c.name, func(t *testing.T) { checkDecodeBody(t, []byte(c.body)) })
	}
}

// TestDecodeBodyDoesNotAlias checks that growing a member never writes
// into the request bytes it was split from.
func TestDecodeBodyDoesNotAlias(t *testing.T) {
	raw := []byte(`{"a":"x","b":"y"}`)
	b, err := decodeBody(raw)
	if err != nil {
		t.Fatal(err)
	}
	b["a"] = append(b["a"], "zzzz"...)
	if string(raw) != `{"a":"x","b":"y"}` || string(b["b"]) != `"y"` {
		t.Fatalf("append to a member changed the body: %s, b=%s", raw, b["b"])
	}
}

func FuzzDecodeBody(f *testing.F) {
	for _, c := range bodySplitCases {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkDecodeBody(t, raw) })
}
