package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// bodySplitCases are bodies whose decoding splitBody must give exactly as
// json.Unmarshal does (members, errors and their text) when they are valid.
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

// checkSplitBody checks splitBody against json.Unmarshal on a valid body,
// and that an invalid one is never refused with an error of its own.
func checkSplitBody(t *testing.T, raw []byte) {
	t.Helper()
	var want rawBody
	wantErr := json.Unmarshal(raw, &want)
	got, err := splitBody(raw)
	if !json.Valid(raw) {
		if err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("splitBody(%q): error %v, json.Unmarshal: %v", raw, err, wantErr)
		}
		return
	}
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("splitBody(%q): error %v, json.Unmarshal: %v", raw, err, wantErr)
	}
	if (got == nil) != (want == nil) || len(got) != len(want) {
		t.Fatalf("splitBody(%q) = %q, json.Unmarshal: %q", raw, got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !bytes.Equal(g, v) {
			t.Fatalf("splitBody(%q)[%q] = %q, json.Unmarshal: %q", raw, k, g, v)
		}
	}
}

func TestSplitBodyMatchesJSON(t *testing.T) {
	for _, c := range bodySplitCases {
		t.Run(c.name, func(t *testing.T) { checkSplitBody(t, []byte(c.body)) })
	}
}

// TestSplitBodyDoesNotAlias checks that growing a member never writes
// into the request bytes it was split from.
func TestSplitBodyDoesNotAlias(t *testing.T) {
	raw := []byte(`{"a":"x","b":"y"}`)
	b, err := splitBody(raw)
	if err != nil {
		t.Fatal(err)
	}
	b["a"] = append(b["a"], "zzzz"...)
	if string(raw) != `{"a":"x","b":"y"}` || string(b["b"]) != `"y"` {
		t.Fatalf("append to a member changed the body: %s, b=%s", raw, b["b"])
	}
}

func FuzzSplitBody(f *testing.F) {
	for _, c := range bodySplitCases {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkSplitBody(t, raw) })
}

// TestBadBodyError checks, on every generating route, that a body that is
// not one JSON object is refused with encoding/json's own account of it,
// wherever the fault lies: before, inside or after the members the
// gateway reads.
func TestBadBodyError(t *testing.T) {
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("upstream reached for a bad body") })
	// An Ollama upstream takes the load and unload requests (no
	// messages, no prompt) as they are, so they are checked too.
	ollama := mustUpstream(t, "ollama", up.URL.String(), upstream.KindOllama)
	llama, olla := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}}), start(t, &Gateway{Upstreams: []*upstream.Upstream{ollama}})
	bodies := []struct{ name, body string }{
		{"truncated", `{"messages":`},
		{"not an object", `[1]`},
		{"trailing garbage", `{"model":"m","messages":[{"role":"user","content":"hi"}],"prompt":"hi"} x`},
		{"bad member deep inside", `{"model":"m","messages":[{"role":"user","content":"hi",}],"prompt":"hi"}`},
		{"bad unknown member", `{"model":"m","messages":[{"role":"user","content":"hi"}],"prompt":"hi","x":[1,]}`},
		{"empty messages and garbage", `{"model":"m","messages":[]}}`},
		{"bad escape", `{"model":"m","messages":[{"role":"user","content":"\q"}],"prompt":"hi"}`},
		{"unload and garbage", `{"model":"m","keep_alive":0}}`},
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/api/chat", "/api/generate"} {
		for _, c := range bodies {
			for _, srv := range []*httptest.Server{llama, olla} {
				t.Run(path+"/"+c.name, func(t *testing.T) {
					var rb rawBody
					want := "request body is not a JSON object: " + json.Unmarshal([]byte(c.body), &rb).Error()
					resp := post(t, srv.URL+path, c.body)
					defer resp.Body.Close()
					b, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(b, []byte(strconv.Quote(want)[1:len(strconv.Quote(want))-1])) {
						t.Fatalf("status %d, body %s; want 400 with %q", resp.StatusCode, b, want)
					}
				})
			}
		}
	}
}
