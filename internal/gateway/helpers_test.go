package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/checks"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestMain registers the built-in checks in validator.Default, which the
// default policy and mustPolicy resolve check names in.
func TestMain(m *testing.M) {
	checks.RegisterDefault()
	os.Exit(m.Run())
}

// start serves g on a test server.
func start(t testing.TB, g *Gateway) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(g)
	t.Cleanup(s.Close)
	return s
}

func mustUpstream(t testing.TB, name, url string, kind upstream.Kind) *upstream.Upstream {
	t.Helper()
	u, err := upstream.New(name, url, kind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.Client.CloseIdleConnections)
	return u
}

func mustPolicy(t testing.TB, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(doc), "test", validator.Default)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// withCheck returns p with a check named name whose validator newV builds
// for each attempt: a test's check enters through the policy, as a guard
// started at run time does (policy.With).
func withCheck(p *policy.Policy, name string, newV func(*validator.Request) validator.Validator) *policy.Policy {
	return p.With(policy.Check{Name: name, Spec: validator.Spec{Name: name,
		New: func(_ any, req *validator.Request) (validator.Validator, error) { return newV(req), nil }}})
}

// streamed is what a client read from a stream.
type streamed struct {
	status  int
	header  http.Header
	trailer http.Header
	events  []string // data payloads, [DONE] included
	content string
	errEv   map[string]json.RawMessage
	last    map[string]json.RawMessage
}

func post(t testing.TB, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readSSE reads an SSE (or, with ndjson, NDJSON) response to its end.
func readStream(t testing.TB, resp *http.Response, ndjson bool) streamed {
	t.Helper()
	defer resp.Body.Close()
	s := streamed{status: resp.StatusCode, header: resp.Header}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var payload string
		if ndjson {
			if line == "" {
				continue
			}
			payload = line
		} else {
			p, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			payload = p
		}
		s.events = append(s.events, payload)
		if payload == "[DONE]" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			t.Fatalf("event not JSON: %q", payload)
		}
		if _, ok := m["error"]; ok {
			s.errEv = m
		}
		s.last = m
		s.content += contentOf(m)
	}
	s.trailer = resp.Trailer
	return s
}

func contentOf(m map[string]json.RawMessage) string {
	if r, ok := m["response"]; ok {
		var s string
		json.Unmarshal(r, &s)
		return s
	}
	if r, ok := m["message"]; ok {
		var msg struct{ Content string }
		json.Unmarshal(r, &msg)
		return msg.Content
	}
	var c struct {
		Choices []struct {
			Text  string
			Delta struct{ Content string }
		}
	}
	json.Unmarshal(mustJSON(m), &c)
	if len(c.Choices) == 0 {
		return ""
	}
	return c.Choices[0].Delta.Content + c.Choices[0].Text
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func readAllBody(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sseBody frames chunks as an upstream stream.
func sseBody(payloads ...string) []byte {
	var b bytes.Buffer
	for _, p := range payloads {
		b.WriteString("data: " + p + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

func chatChunk(content string) string {
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": content}, "finish_reason": nil}}})
	return string(b)
}

const finishChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"timings":{"predicted_n":3}}`
