package gateway

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// TestRepairedSaysWhy: an answer that passed only after a hidden retry
// names what was repaired, in the verdict ("repaired": [reasons]) and in
// the X-Aegis-Repaired header (a trailer on streams); a first-time pass
// carries neither.
func TestRepairedSaysWhy(t *testing.T) {
	var calls atomic.Int32
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if n%2 == 1 {
			w.Write(sseBody(chatChunk("Sure! "), chatChunk(`{"a":1}`), finishChunk))
			return
		}
		w.Write(sseBody(chatChunk(`{"a"`), chatChunk(`:1}`), finishChunk))
	})
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, Policy: requireJSON(t, "")})
	type verdict struct {
		Repaired json.RawMessage `json:"repaired"`
		Attempts int             `json:"attempts"`
	}
	for _, stream := range []bool{true, false} {
		calls.Store(0)
		body := `{"messages":[{"role":"user","content":"JSON only"}],"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
		resp := post(t, srv.URL+"/v1/chat/completions", body)
		var v verdict
		var header string
		if stream {
			s := readStream(t, resp, false)
			json.Unmarshal(s.last["aegis"], &v)
			header = s.trailer.Get(HeaderRepaired)
		} else {
			var out struct{ Aegis verdict }
			json.Unmarshal(readAllBody(t, resp), &out)
			v, header = out.Aegis, resp.Header.Get(HeaderRepaired)
		}
		if string(v.Repaired) != `["invalid_json"]` || header != "invalid_json" || v.Attempts != 2 {
			t.Fatalf("stream=%v: repaired %s, header %q, attempts %d; want [\"invalid_json\"], invalid_json, 2", stream, v.Repaired, header, v.Attempts)
		}
	}
	// A first-time pass says nothing was repaired.
	calls.Store(1)
	resp := post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"JSON only"}]}`)
	var out struct{ Aegis verdict }
	json.Unmarshal(readAllBody(t, resp), &out)
	if out.Aegis.Repaired != nil || resp.Header.Get(HeaderRepaired) != "" || out.Aegis.Attempts != 1 {
		t.Fatalf("first-time pass: repaired %s header %q attempts %d", out.Aegis.Repaired, resp.Header.Get(HeaderRepaired), out.Aegis.Attempts)
	}
}
