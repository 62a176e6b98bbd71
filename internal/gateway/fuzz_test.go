package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// FuzzJSONDepth checks jsonDepth against a decoder's view of nesting on
// valid JSON.
func FuzzJSONDepth(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[[1]]}`, `{"a":"[[[["}`, `{"a":"\"[["}`, `[[],[[]]]`, `"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := jsonDepth([]byte(s))
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return
		}
		if want := depthOf(v); got != want {
			t.Fatalf("jsonDepth(%q) = %d, want %d", s, got, want)
		}
	})
}

func depthOf(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	case []any:
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}

// FuzzParseChunk feeds arbitrary payloads to every route's chunk parser:
// no panic, and a parsed text is what the payload said.
func FuzzParseChunk(f *testing.F) {
	for _, s := range []string{chatChunk("x"), finishChunk, `{"message":{"content":"a"},"done":false}`, `{"response":"b","done":true}`, `{"error":"x"}`, `{`, `null`, `{"choices":[]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, k := range dialects {
			var c chunk
			if k.parse([]byte(s), &c) == nil && c.hasText && len(c.text) == 0 {
				t.Fatalf("%s: hasText with empty text for %q", k, s)
			}
		}
	})
}

// FuzzRequestBody sends arbitrary bodies to the chat route in front of a
// fake upstream: every answer is a 200 or a JSON error object, never a
// panic or a 500.
func FuzzRequestBody(f *testing.F) {
	for _, s := range []string{`{"messages":[{"role":"user","content":"x"}]}`, `{"messages":`, `[1]`, `{"messages":[]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true}`, `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object"}}}}`} {
		f.Add(s)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(sseBody(chatChunk(`{"a":1}`), finishChunk))
	}))
	defer up.Close()
	u, _ := upstream.New("fake", up.URL, upstream.KindLlamaServer)
	defer u.Client.CloseIdleConnections()
	g := &Gateway{Upstreams: []*upstream.Upstream{u}}
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body)))
		if rec.Code == 200 {
			return
		}
		var e errorBody
		if rec.Code >= 500 && rec.Code != 502 || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Code == "" {
			t.Fatalf("body %q: %d %s", body, rec.Code, rec.Body.String())
		}
	})
}
