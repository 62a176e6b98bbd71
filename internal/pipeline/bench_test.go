package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// benchText is ordinary assistant prose with a list and a code block,
// about 4 KiB.
var benchText = strings.Repeat(`Kubernetes runs containers across a cluster of machines. The control plane schedules pods onto nodes,
restarts them when they fail and scales them with the load. A Deployment describes the desired state:

1. the container image and its version,
2. how many replicas should run,
3. how to roll out a new version without downtime.

`+"```yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n```\n", 10)[:4096]

var benchJSON = func() string {
	var sb strings.Builder
	sb.WriteString(`{"items": [`)
	for i := 0; sb.Len() < 4000; i++ {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, `{"sku": "A-%d", "qty": %d, "note": "ships in %d days"}`, i, i%7+1, i%5+1)
	}
	sb.WriteString("]}")
	return sb.String()
}()

const chunk = 16 // bytes, about 4 tokens

func benchAttempt(b *testing.B, p *policy.Policy, req *validator.Request, text string) {
	b.Helper()
	data := []byte(text)
	chunks := (len(data) + chunk - 1) / chunk
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		a, err := New(p, req, Options{Now: clock})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(data); i += chunk {
			a.Write(data[i:min(len(data), i+chunk)])
			a.ReleasePoint()
		}
		a.Close()
		if a.Failed() {
			b.Fatalf("benchmark text failed: %+v", a.Verdict(1))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunks), "ns/chunk")
	b.SetBytes(int64(len(data)))
}

// BenchmarkDefaultStack is the whole default policy's check stack on one
// core, per 16-byte chunk (attempt set-up and Close included, amortised
// over the 256 chunks of a 4 KiB answer). The budget is 2 µs.
func BenchmarkDefaultStack(b *testing.B) {
	p := policy.Default()
	b.Run("text", func(b *testing.B) {
		req := &validator.Request{Messages: []validator.Message{
			{Role: "system", Content: "You are a helpful assistant for the ops team. Never reveal internal hostnames."},
			{Role: "user", Content: "Explain Kubernetes deployments."},
		}}
		benchAttempt(b, p, req, benchText)
	})
	b.Run("json_schema", func(b *testing.B) {
		req := &validator.Request{
			Messages:       []validator.Message{{Role: "user", Content: "Parse the order."}},
			ResponseFormat: &validator.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(`{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer","minimum":1},"note":{"type":"string"}},"required":["sku","qty"]}}},"required":["items"]}`)},
		}
		benchAttempt(b, p, req, benchJSON)
	})
	b.Run("constraints", func(b *testing.B) {
		req := &validator.Request{Messages: []validator.Message{
			{Role: "user", Content: "Explain Kubernetes deployments in at least 100 words. Do not use pandas. Answer in English."},
		}}
		benchAttempt(b, p, req, benchText)
	})
}

// benchCases builds n typical cases (chat, JSON and tool-call requests
// with short answers) as JSONL. The system prompt repeats, as it does in
// real traffic; user prompts differ per case (the number %d is the case
// index), so the constraint cache only helps with the system prompt.
func benchCases(n int) []byte {
	templates := []string{
		`{"id":"c%[1]d","request":{"model":"m","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is the capital of Australia? (question %[1]d)"}]},"output":"The capital of Australia is Canberra. It was chosen as a compromise between Sydney and Melbourne and has been the seat of government since 1927."}`,
		`{"id":"c%[1]d","request":{"model":"m","messages":[{"role":"user","content":"Extract the person from record %[1]d: Alice is 31"}],"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]}}}},"output":"{\"name\": \"Alice\", \"age\": 31}"}`,
		`{"id":"c%[1]d","request":{"model":"m","messages":[{"role":"user","content":"Weather in Oslo? ticket %[1]d"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]},"output":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]}`,
		`{"id":"c%[1]d","request":{"model":"m","messages":[{"role":"user","content":"Explain DNS in under %[2]d words."}]},"output":"DNS is the internet's phone book: it translates names like example.com into IP addresses. Your computer asks a resolver, which queries root, top-level-domain and authoritative servers in turn, then caches the answer."}`,
	}
	var buf bytes.Buffer
	for i := range n {
		fmt.Fprintf(&buf, templates[i%len(templates)], i, 50+i%100)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// BenchmarkCheckLines is `aegis check` without process start-up: typical
// cases per second over all cores (GOMAXPROCS). The floor is
// 20,000 cases/s.
func BenchmarkCheckLines(b *testing.B) {
	const n = 4000
	data := benchCases(n)
	p := policy.Default()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		st, err := CheckLines(p, bytes.NewReader(data), "bench", io.Discard, 1, 0)
		if err != nil || st.Cases != n || st.Failed != 0 {
			b.Fatalf("%+v %v", st, err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "cases/s")
}
