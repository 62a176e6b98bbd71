package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// benchText is about 4 KiB of assistant-like prose without repeats: a
// fixed pseudo-random walk over a vocabulary, in sentences and paragraphs
// (a repeated block would rightly fail the repetition check).
var benchText = func() string {
	words := strings.Fields(`the a cluster node pod service deployment runs schedules restarts scales image version replica
		control plane network storage volume secret config map label selector rollout update health probe ready live
		container process memory cpu limit request quota namespace policy role account token certificate ingress route
		load balancer port traffic client server request response latency error retry timeout backoff queue worker job
		batch cron event log metric trace alert dashboard team owner budget cost region zone failure recovery backup
		restore snapshot database cache index query table row column schema migration release branch commit review
		test build pipeline artifact registry deploy canary blue green feature flag user session cookie header body`)
	var sb strings.Builder
	x := uint32(2463534242)
	next := func() uint32 { x ^= x << 13; x ^= x >> 17; x ^= x << 5; return x }
	for sb.Len() < 4096 {
		n := 8 + int(next()%9)
		for i := range n {
			w := words[next()%uint32(len(words))]
			if i == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			sb.WriteString(w)
			if i < n-1 {
				sb.WriteByte(' ')
			}
		}
		sb.WriteString(". ")
		if next()%5 == 0 {
			sb.WriteString("\n\n")
		}
	}
	return sb.String()[:4096]
}()

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
	clk := clock.NewFake(now)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for b.Loop() {
		a, err := New(p, req, Options{Clock: clk})
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
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N*chunks), "cpu-ns/chunk")
	b.SetBytes(int64(len(data)))
}

// processCPU is the CPU time the process has used (user + system). On a
// shared, loaded machine wall time per operation overstates the cost;
// the benchmarks report CPU time per unit beside it (it includes the GC's
// work on other threads).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
	// The same JSON without the leak check: its credential scan rescans
	// the current line at every quote, which dominates on one-line JSON
	// (reported to the leak check's owner).
	b.Run("json_schema_no_leak", func(b *testing.B) {
		noLeak, err := policy.Parse([]byte("checks: {leak: false}\n"), "bench", validator.Default)
		if err != nil {
			b.Fatal(err)
		}
		req := &validator.Request{
			Messages:       []validator.Message{{Role: "user", Content: "Parse the order."}},
			ResponseFormat: &validator.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(`{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer","minimum":1},"note":{"type":"string"}},"required":["sku","qty"]}}},"required":["items"]}`)},
		}
		benchAttempt(b, noLeak, req, benchJSON)
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
	cpu0 := processCPU()
	for b.Loop() {
		st, err := CheckLines(p, bytes.NewReader(data), "bench", io.Discard, 1, 0)
		if err != nil || st.Cases != n || st.Failed != 0 {
			b.Fatalf("%+v %v", st, err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "cases/s")
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/case")
}
