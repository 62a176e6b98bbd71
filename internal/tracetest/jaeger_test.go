package tracetest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testlog"

	"github.com/nats-io/nats.go"

	"github.com/aegis-sentinel/aegis/internal/cli"
	"github.com/aegis-sentinel/aegis/internal/fleet"
	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// jaegerTrace is what Jaeger's query API answers for one trace.
type jaegerTrace struct {
	Spans []struct {
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		Tags []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
		ProcessID string `json:"processID"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// span is one span of a trace read back, with its tags as strings.
type span struct {
	id, name, parent, service string
	tags                      map[string]string
}

func (tr *jaegerTrace) spans() []span {
	var out []span
	for _, s := range tr.Spans {
		sp := span{id: s.SpanID, name: s.OperationName, service: tr.Processes[s.ProcessID].ServiceName, tags: map[string]string{}}
		for _, r := range s.References {
			if r.RefType == "CHILD_OF" {
				sp.parent = r.SpanID
			}
		}
		for _, t := range s.Tags {
			sp.tags[t.Key] = fmt.Sprint(t.Value)
		}
		out = append(out, sp)
	}
	return out
}

// readTrace polls Jaeger until the trace holds what done accepts: the
// exporters have flushed, but Jaeger stores what it receives on its own
// time and tells nobody. The bound is far past any ingestion delay, so
// only a trace that never completes fails, never a slow one.
func readTrace(t *testing.T, query, traceID string, done func([]span) bool) []span {
	t.Helper()
	var last []span
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	for giveUp := time.Now().Add(2 * time.Minute); time.Now().Before(giveUp); <-poll.C {
		resp, err := http.Get(query + "/api/traces/" + traceID)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Data []jaegerTrace `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || len(body.Data) == 0 {
			continue
		}
		last = body.Data[0].spans()
		if done(last) {
			return last
		}
	}
	t.Fatalf("trace %s never complete in Jaeger; it holds %v", traceID, names(last))
	return nil
}

func names(spans []span) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.service+":"+s.name)
	}
	return n
}

func find(spans []span, name string) []span {
	var out []span
	for _, s := range spans {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

func newTraceID(t *testing.T) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// serve runs `aegis serve` in-process (tracing as the OTEL_* environment
// says) and returns its base URL and the function that stops it.
func serve(t *testing.T, args ...string) (string, func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errb testlog.Buffer
	go func() {
		done <- cli.Run(ctx, append([]string{"serve", "--listen", addr, "--log-format", "json",
			"--incidents-db", filepath.Join(t.TempDir(), "incidents.db")}, args...), &cli.IO{In: strings.NewReader(""), Out: io.Discard, Err: &errb})
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("aegis serve exited %d:\n%s", code, errb.String())
			}
		})
	}
	t.Cleanup(stop)
	// serve logs where it listens once it does; no wall-clock limit: go
	// test's -timeout ends a start that never ends.
	for {
		changed := errb.Changed()
		if strings.Contains(errb.String(), `"msg":"listening`) {
			return "http://" + addr, stop
		}
		select {
		case <-changed:
		case code := <-done:
			t.Fatalf("aegis serve exited %d at start:\n%s", code, errb.String())
		}
	}
}

// answer is what the client learned of a streamed request.
type answer struct {
	status   int
	verdict  string
	attempts string
	halted   bool
}

// ask streams a chat request sent with a W3C traceparent of traceID.
func ask(t *testing.T, base, traceID, prompt string) answer {
	t.Helper()
	body := fmt.Sprintf(`{"model":"stories","messages":[{"role":"user","content":%q}],"temperature":0,"max_tokens":120,"stream":true}`, prompt)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), `"error"`) {
			a.halted = true
		}
	}
	a.verdict, a.attempts = resp.Trailer.Get("X-Aegis-Verdict"), resp.Trailer.Get("X-Aegis-Attempts")
	return a
}

// otelEnv points this process's exporter at Jaeger over OTLP/HTTP, with a
// service name of its own so runs never mix.
func otelEnv(t *testing.T, env *testbed.Env) string {
	service := "aegis-test-" + newTraceID(t)[:8]
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", env.JaegerOTLPHTTP)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", service)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	return service
}

// TestJaegerRequests: a passed, a repaired (hidden retry) and a halted
// request through a real llama-server each arrive in Jaeger as one trace
// continuing the client's, with the request, attempt, upstream and
// decision spans and the verdict as attributes.
func TestJaegerRequests(t *testing.T) {
	env := testbed.Require(t, "llama-cpu", "jaeger")
	service := otelEnv(t, env)
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	// "scary" is in the tiny model's answer to "Once upon a time" only.
	if err := os.WriteFile(pol, []byte("checks:\n  banned: {terms: [scary]}\nactions:\n  banned_content: {action: halt, risk: high}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, stop := serve(t, "--upstream", env.LlamaCPUURL, "--kind", "llama-server", "--policy", pol)
	cases := []struct {
		name, prompt, outcome string
		attempts              int
	}{
		{"passed", "Tell me about the dog.", "released", 1},
		// The default policy compiles "JSON only" into json_syntax; the
		// tiny model answers prose, the hidden retry asks for
		// grammar-constrained JSON.
		{"repaired", "Reply in JSON only: the name of the girl.", "repaired", 2},
		{"halted", "Once upon a time", "halted", 1},
	}
	ids := map[string]string{}
	for _, c := range cases {
		ids[c.name] = newTraceID(t)
		a := ask(t, base, ids[c.name], c.prompt)
		t.Logf("%s: status %d verdict %q attempts %s halted %v", c.name, a.status, a.verdict, a.attempts, a.halted)
	}
	stop() // flushes the last spans
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spans := readTrace(t, env.JaegerQueryURL, ids[c.name], func(s []span) bool {
				r := find(s, "chat stories")
				// Jaeger indexes the spans of one trace as they come:
				// wait for every span the checks below read.
				return len(r) == 1 && r[0].tags["aegis.outcome"] != "" && len(find(s, "aegis.decision")) >= c.attempts &&
					len(find(s, "aegis.attempt")) >= c.attempts && len(find(s, "aegis.upstream")) >= c.attempts
			})
			req := find(spans, "chat stories")[0]
			if req.service != service {
				t.Errorf("request span from service %q, want %q", req.service, service)
			}
			if req.parent != "00f067aa0ba902b7" {
				t.Errorf("request span's parent %q: not the client's span", req.parent)
			}
			for k, want := range map[string]string{"gen_ai.system": "llama.cpp", "gen_ai.operation.name": "chat",
				"gen_ai.request.model": "stories", "aegis.outcome": c.outcome, "aegis.attempts": fmt.Sprint(c.attempts)} {
				if got := req.tags[k]; got != want {
					t.Errorf("request %s = %q, want %q (tags %v)", k, got, want, req.tags)
				}
			}
			if req.tags["gen_ai.usage.output_tokens"] == "" && c.outcome != "halted" {
				t.Errorf("no token usage on the request span: %v", req.tags)
			}
			atts := find(spans, "aegis.attempt")
			if len(atts) != c.attempts {
				t.Fatalf("%d attempt spans, want %d: %v", len(atts), c.attempts, names(spans))
			}
			for _, a := range atts {
				if a.parent != req.id {
					t.Errorf("attempt %s not a child of the request", a.tags["aegis.attempt"])
				}
				var up, dec bool
				for _, s := range spans {
					up = up || s.name == "aegis.upstream" && s.parent == a.id
					dec = dec || s.name == "aegis.decision" && s.parent == a.id
				}
				if !up || !dec {
					t.Errorf("attempt %s: upstream span %v, decision span %v", a.tags["aegis.attempt"], up, dec)
				}
			}
			last := find(spans, "aegis.decision")
			switch c.outcome {
			case "halted":
				if req.tags["aegis.reason"] != "banned_content" || req.tags["aegis.action"] != "halt" {
					t.Errorf("halted request's reason %q action %q", req.tags["aegis.reason"], req.tags["aegis.action"])
				}
			case "repaired":
				var failed bool
				for _, d := range last {
					failed = failed || d.tags["aegis.verdict"] == "fail" && strings.Contains(d.tags["aegis.guardrails"], "json")
				}
				if !failed {
					t.Errorf("no failed json decision in the repaired trace")
				}
			}
			for _, s := range spans {
				for k, v := range s.tags {
					if k == "aegis.output.text" || strings.Contains(v, "scary") {
						t.Errorf("span %s carries text (%s) without log_text", s.name, k)
					}
				}
			}
		})
	}
}

// TestJaegerFleetWorker: a request judged by a guard worker over NATS
// arrives as one trace in which the worker's span (another process,
// exporting over OTLP/gRPC) is a child of the gateway's guard call.
func TestJaegerFleetWorker(t *testing.T) {
	env := testbed.Require(t, "llama-cpu", "jaeger")
	service := otelEnv(t, env)
	nt := testbed.StartNATS(t)
	bin := filepath.Join(t.TempDir(), "aegis")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/aegis-sentinel/aegis/cmd/aegis").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var wlog testlog.Buffer
	w := exec.Command(bin, "guard-worker", "--nats", nt.URL, "--guard-url", env.LlamaCPUURL, "--model-name", "stories", "--id", "traced-worker")
	w.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+env.JaegerOTLPGRPC, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_SERVICE_NAME="+service+"-worker")
	w.Stdout, w.Stderr = &wlog, &wlog
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Process.Signal(os.Interrupt); w.Wait() })
	waitWorker(t, nt.URL, &wlog)
	base, stop := serve(t, "--upstream", env.LlamaCPUURL, "--kind", "llama-server", "--nats", nt.URL,
		"--guard-workers", "stories", "--guard-deadline", "30s")
	id := newTraceID(t)
	a := ask(t, base, id, "Tell me about the dog.")
	t.Logf("fleet request: status %d verdict %q attempts %s", a.status, a.verdict, a.attempts)
	stop()
	w.Process.Signal(os.Interrupt) // flushes the worker's spans
	w.Wait()
	spans := readTrace(t, env.JaegerQueryURL, id, func(s []span) bool {
		// Jaeger indexes a trace's spans as they come: wait until each
		// worker span's guard call and each guard call's parent are in.
		ids := map[string]bool{}
		for _, x := range s {
			ids[x.id] = true
		}
		for _, x := range append(find(s, "aegis.guard.worker"), find(s, "aegis.guard")...) {
			if !ids[x.parent] {
				return false
			}
		}
		return len(find(s, "aegis.guard.worker")) > 0 && len(find(s, "aegis.guard")) > 0 && len(find(s, "chat stories")) == 1
	})
	t.Logf("trace: %v", names(spans))
	guards := map[string]span{}
	if len(find(spans, "aegis.guard")) == 0 {
		t.Fatal("no guard call span")
	}
	for _, g := range find(spans, "aegis.guard") {
		guards[g.id] = g
		if g.tags["aegis.guard.transport"] != "nats" || g.service != service {
			t.Errorf("guard span %v from %s", g.tags, g.service)
		}
	}
	for _, wk := range find(spans, "aegis.guard.worker") {
		g, ok := guards[wk.parent]
		if !ok {
			t.Errorf("worker span's parent %s is no guard call of the gateway", wk.parent)
		}
		if wk.service != service+"-worker" || wk.tags["aegis.guard.worker"] != "traced-worker" {
			t.Errorf("worker span from %q tags %v", wk.service, wk.tags)
		}
		if g.tags["aegis.request_id"] != wk.tags["aegis.request_id"] {
			t.Errorf("worker judged request %q, the guard call was for %q", wk.tags["aegis.request_id"], g.tags["aegis.request_id"])
		}
	}
	req := find(spans, "chat stories")[0]
	for _, g := range guards {
		var att span
		for _, s := range find(spans, "aegis.attempt") {
			if s.id == g.parent {
				att = s
			}
		}
		// A guard call belongs to an attempt; the warm-up prefill the
		// guard may send as the request arrives can sit on the request.
		if (att.id == "" || att.parent != req.id) && g.parent != req.id {
			t.Errorf("guard call %s (parent %s) is neither a child of an attempt of the request nor of the request", g.id, g.parent)
		}
	}
}

// waitWorker waits until the worker answers the fleet's roll call.
func waitWorker(t *testing.T, natsURL string, log *testlog.Buffer) {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for giveUp := time.Now().Add(time.Minute); time.Now().Before(giveUp); {
		ms, err := fleet.RollCall(context.Background(), nc, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.ID == "traced-worker" {
				return
			}
		}
	}
	t.Fatalf("the guard worker never answered the roll call:\n%s", log.String())
}
