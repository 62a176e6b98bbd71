package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/store"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// refusalCase is one line of the refusal cases (the aegis check format),
// shared with the aegis check and aegis mcp tests.
type refusalCase struct {
	ID        string          `json:"id"`
	Request   json.RawMessage `json:"request"`
	Output    string          `json:"output"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func loadRefusalCases(t *testing.T) []refusalCase {
	t.Helper()
	f, err := os.Open("../cli/testdata/flow/noleak.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []refusalCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c refusalCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// forbidden returns the pieces of a case that no message may hold: every
// 8-byte window of every argument value (of the raw arguments when they
// are not JSON), and of the system prompt's key.
func (c refusalCase) forbidden(key string) []string {
	var texts []string
	for _, tc := range c.ToolCalls {
		if !toolcalls.Valid(tc.Function.Arguments) {
			texts = append(texts, tc.Function.Arguments[strings.Index(tc.Function.Arguments, "zorb"):])
			continue
		}
		for _, v := range toolcalls.Values(tc.Function.Arguments) {
			texts = append(texts, v.Text)
		}
	}
	if i := strings.Index(c.Output, "?k="); i >= 0 {
		texts = append(texts, c.Output[i+3:])
	}
	texts = append(texts, key)
	return windows(texts, 8)
}

func windows(texts []string, n int) []string {
	var out []string
	for _, s := range texts {
		for i := 0; i+n <= len(s); i++ {
			out = append(out, s[i:i+n])
		}
	}
	return out
}

// findLeak returns the first forbidden piece in text, or "".
func findLeak(text string, forbidden []string) string {
	for _, w := range forbidden {
		if strings.Contains(text, w) {
			return w
		}
	}
	return ""
}

const refusalKey = "mirror-7Q2x-Lattice"

// TestRefusalsLeakNothing runs every kind of refusal through the gateway,
// streamed and whole (the flow rule, plain and hex-encoded; a credential;
// a schema violation retried until it halts; a shell command; the system
// prompt copied; an injected result; a markdown image; arguments that are
// not JSON; a payment to a recipient only a tool result named; a
// PostgreSQL statement the tokeniser classifies): the answer, every event, the incident made of each and the
// log hold no byte of the arguments or of the system prompt's key.
func TestRefusalsLeakNothing(t *testing.T) {
	for _, c := range loadRefusalCases(t) {
		for _, stream := range []bool{true, false} {
			name := c.ID + map[bool]string{true: " streamed", false: " whole"}[stream]
			t.Run(name, func(t *testing.T) {
				var payloads []string
				for i, tc := range c.ToolCalls {
					a := tc.Function.Arguments
					cut := len(a) / 2
					payloads = append(payloads, toolChunk(i, tc.ID, tc.Function.Name, a[:cut]), toolChunk(i, "", "", a[cut:]))
				}
				if len(c.ToolCalls) > 0 {
					payloads = append(payloads, toolFinish)
				} else {
					cut := len(c.Output) / 2
					payloads = append(payloads, chatChunk(c.Output[:cut]), chatChunk(c.Output[cut:]), finishChunk)
				}
				up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "text/event-stream")
					w.Write(sseBody(payloads...))
				})
				var req map[string]any
				if err := json.Unmarshal(c.Request, &req); err != nil {
					t.Fatal(err)
				}
				req["stream"] = stream
				body, _ := json.Marshal(req)
				bus := &events.Bus{}
				sub := bus.Subscribe(1024)
				defer sub.Close()
				var logs bytes.Buffer
				srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, Events: bus, ErrorLog: log.New(&logs, "", 0)})
				resp := post(t, srv.URL+"/v1/chat/completions", string(body))
				raw := readAllBody(t, resp)
				if !bytes.Contains(raw, []byte("aegis_")) {
					t.Fatalf("not refused:\n%s", raw)
				}
				bad := c.forbidden(refusalKey)
				if w := findLeak(string(raw), bad); w != "" {
					t.Errorf("the answer holds %q:\n%s", w, raw)
				}
				n := 0
				for len(sub.C) > 0 {
					e := <-sub.C
					n++
					b, _ := json.Marshal(e)
					if w := findLeak(string(b), bad); w != "" {
						t.Errorf("a %s event holds %q:\n%s", e.Kind, w, b)
					}
					b, _ = json.Marshal(store.IncidentFromEvent(e))
					if w := findLeak(string(b), bad); w != "" {
						t.Errorf("the incident of a %s event holds %q:\n%s", e.Kind, w, b)
					}
				}
				if n == 0 {
					t.Error("no events")
				}
				if w := findLeak(logs.String(), bad); w != "" {
					t.Errorf("the log holds %q:\n%s", w, logs.String())
				}
			})
		}
	}
}
