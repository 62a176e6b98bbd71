package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// bodySplitCases are bodies whose decoding splitRequest must give exactly as
// json.Unmarshal does (members, errors and their text) when they are valid.
// exact is what splitRequest must say of the body: it reads the same
// however a parser treats names given twice or escaped.
var bodySplitCases = []struct {
	name, body string
	exact      bool
}{
	{"empty object", `{}`, true},
	{"spaced empty object", " \n{ \t}\r\n", true},
	{"chat", `{"messages":[{"role":"user","content":"Tell me a story."}],"stream":true,"temperature":0,"max_tokens":200}`, true},
	{"spaces around members", ` { "a" : 1 , "b" :[ 1 , {"c":"}"} ] , "d": "x\"]}" } `, true},
	{"literals and numbers", `{"t":true,"f":false,"n":null,"i":-12,"e":1.5e+3}`, true},
	{"nested brackets in strings", `{"s":"[{","o":{"k":"]}"},"a":["\\",{}]}`, true},
	{"duplicate member keeps the last", `{"n":1,"n":2}`, false},
	{"escaped name", `{"mod\u0065l":"m"}`, false},
	{"non-ASCII name", `{"modèle":"m"}`, false},
	{"invalid UTF-8 name", "{\"m\xffl\":1}", false},
	{"case variants", `{"model":"a","Model":"b"}`, true},
	{"not an object", `[1,2]`, false},
	{"null", `null`, false},
	{"string", `"x"`, false},
	{"truncated", `{"a":1`, false},
	{"trailing garbage", `{"a":1}x`, false},
	{"missing colon", `{"a" 1}`, false},
	{"trailing comma", `{"a":1,}`, false},
	{"empty", ``, false},
}

// checkSplitBody checks splitRequest against json.Unmarshal on a valid body,
// and that an invalid one is never refused with an error of its own.
func checkSplitBody(t *testing.T, raw []byte) {
	t.Helper()
	var want rawBody
	wantErr := json.Unmarshal(raw, &want)
	got, exact, err := splitRequest(raw)
	if exact {
		// The upstream may read raw itself: it must mean what the members
		// encoded again mean, to any parser (one with the first of two
		// equal names winning too).
		var fromRaw, fromMembers any
		if json.Unmarshal(raw, &fromRaw) != nil || json.Unmarshal(got.encode(), &fromMembers) != nil {
			t.Fatalf("splitRequest(%q) is exact for a body that does not decode", raw)
		}
		if !reflect.DeepEqual(fromRaw, fromMembers) {
			t.Fatalf("splitRequest(%q) is exact, but the members say %v and raw %v", raw, fromMembers, fromRaw)
		}
		if n := bytes.Count(got.encode(), []byte(`":`)); n < len(got) {
			t.Fatalf("splitRequest(%q): %d members encode as fewer", raw, len(got))
		}
	}
	if !json.Valid(raw) {
		if err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("splitRequest(%q): error %v, json.Unmarshal: %v", raw, err, wantErr)
		}
		return
	}
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("splitRequest(%q): error %v, json.Unmarshal: %v", raw, err, wantErr)
	}
	if (got == nil) != (want == nil) || len(got) != len(want) {
		t.Fatalf("splitRequest(%q) = %q, json.Unmarshal: %q", raw, got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !bytes.Equal(g, v) {
			t.Fatalf("splitRequest(%q)[%q] = %q, json.Unmarshal: %q", raw, k, g, v)
		}
	}
}

func TestSplitBodyMatchesJSON(t *testing.T) {
	for _, c := range bodySplitCases {
		t.Run(c.name, func(t *testing.T) {
			checkSplitBody(t, []byte(c.body))
			if _, exact, _ := splitRequest([]byte(c.body)); exact != c.exact {
				t.Errorf("splitRequest(%q): exact %v, want %v", c.body, exact, c.exact)
			}
		})
	}
}

// TestUpstreamGetsRequestAsSent: a streaming request the gateway does
// not change reaches the upstream byte for byte (member order and spacing
// too); one it changes, or whose bytes a parser could read otherwise than
// the gateway did, is encoded again from what the gateway read.
func TestUpstreamGetsRequestAsSent(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"Tell me a story."}]`
	for _, c := range []struct {
		name, body string
		asSent     bool
		want       string // in what the upstream got, when not as sent
	}{
		{"streaming, unchanged", `{ "stream" : true,` + msgs + `, "model":"m", "max_tokens":9 }`, true, ""},
		{"not streaming", `{"stream":false,` + msgs + `}`, false, `"stream":true`},
		{"stream absent", `{` + msgs + `}`, false, `"stream":true`},
		{"a name twice", `{"stream":true,"max_tokens":1,"max_tokens":9,` + msgs + `}`, false, `"max_tokens":9`},
		{"escaped name", `{"stream":true,"max_tok\u0065ns":9,` + msgs + `}`, false, `"max_tokens":9`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := make(chan []byte, 1)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- b
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write(sseBody(chatChunk("Once."), finishChunk))
			}))
			t.Cleanup(up.Close)
			srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{mustUpstream(t, "up", up.URL, upstream.KindLlamaServer)}})
			resp := post(t, srv.URL+"/v1/chat/completions", c.body)
			readAllBody(t, resp)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			sent := <-got
			switch {
			case c.asSent && string(sent) != c.body:
				t.Fatalf("upstream got %s, want the request as sent", sent)
			case !c.asSent && (string(sent) == c.body || !bytes.Contains(sent, []byte(c.want)) || bytes.Count(sent, []byte(`"max_tokens"`)) > 1):
				t.Fatalf("upstream got %s, want it encoded again with %s", sent, c.want)
			}
		})
	}
}

// TestSplitBodyDoesNotAlias checks that growing a member never writes
// into the request bytes it was split from.
func TestSplitBodyDoesNotAlias(t *testing.T) {
	raw := []byte(`{"a":"x","b":"y"}`)
	b, _, err := splitRequest(raw)
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
