package gateway

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// TestFixSyntaxAppliedLocally: an upstream that always answers with a
// trailing comma gets its answer repaired by Aegis, without a retry, when
// the repaired document satisfies the schema; when it does not, or the
// repair does not apply, the request is retried as before.
func TestFixSyntaxAppliedLocally(t *testing.T) {
	const schema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"pets":{"type":"array"}},"required":["name","age"],"additionalProperties":false}`
	for _, tc := range []struct {
		name   string
		stream bool
		first  []string // the first answer's chunks; a retry answers good
		want   string
		calls  int32
	}{
		{"trailing comma at the end", false, []string{`{"name": "Tom", `, `"age": 3,`, `}`}, `{"name": "Tom", "age": 3}`, 1},
		{"trailing comma inside, streamed", true, []string{`{"name": "Tom", "pets": ["cat",`, `], "age": 3}`}, `{"name": "Tom", "pets": ["cat"], "age": 3}`, 1},
		{"single quotes", false, []string{`{'name': 'Tom', 'age': 3}`}, `{"name": "Tom", "age": 3}`, 1},
		{"repaired but the schema fails", false, []string{`{"name": "Tom",`, `}`}, `{"name":"Ann","age":4}`, 2},
		{"not mechanically repairable", true, []string{`Sure: {"name": "Tom", "age": 3}`}, `{"name":"Ann","age":4}`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if calls.Add(1) == 1 {
					var evs []string
					for _, c := range tc.first {
						evs = append(evs, chatChunk(c))
					}
					w.Write(sseBody(append(evs, finishChunk)...))
					return
				}
				w.Write(sseBody(chatChunk(`{"name":"Ann",`), chatChunk(`"age":4}`), finishChunk))
			})
			srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}})
			body := `{"messages":[{"role":"user","content":"a person"}],"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":` + schema + `}},"stream":` + map[bool]string{true: "true", false: "false"}[tc.stream] + `}`
			resp := post(t, srv.URL+"/v1/chat/completions", body)
			var content string
			var m meta
			status := resp.StatusCode
			if tc.stream {
				s := readStream(t, resp, false)
				content = s.content
				json.Unmarshal(s.last["aegis"], &m)
			} else {
				var out struct {
					Choices []struct{ Message struct{ Content string } }
					Aegis   meta
				}
				b := readAllBody(t, resp)
				json.Unmarshal(b, &out)
				if len(out.Choices) == 0 {
					t.Fatalf("status %d body %s (calls %d)", status, b, calls.Load())
				}
				content, m = out.Choices[0].Message.Content, out.Aegis
			}
			if status != 200 || content != tc.want || calls.Load() != tc.calls || len(m.Repaired) == 0 || m.Attempts != int(tc.calls) {
				t.Fatalf("status %d content %q upstream calls %d (want %q after %d) meta %+v", status, content, calls.Load(), tc.want, tc.calls, m)
			}
		})
	}
}
