package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/aegis-sentinel/aegis/internal/clock"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
)

var echoTool = fakeTool{Name: "echo", Description: "Echoes back the input string", InputSchema: json.RawMessage(objSchema)}

func TestPassThroughByteForByte(t *testing.T) {
	h := newHarness(t, testJudge(t, ""), echoTool)
	// Unknown fields, odd spacing and ids pass exactly as sent and answered.
	h.send(`{"jsonrpc":"2.0","id":"a-1","method":"initialize","params":{"protocolVersion":"2025-06-18","x-extra":{"k":[1,2]}}}`)
	got := h.nextRaw()
	if !strings.Contains(got, `"x-unknown-field":[1,2]`) || !strings.Contains(got, `"id":"a-1"`) {
		t.Errorf("initialize answer changed: %s", got)
	}
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	h.send(`{"jsonrpc":"2.0","id":7,"method":"resources/list","params":{}}`)
	if m := h.next(); errCode(m) != -32601 || m["id"].(float64) != 7 {
		t.Errorf("unknown method: %v", m)
	}
	h.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}`)
	if got := h.nextRaw(); got != `{"content":[{"text":"hello","type":"text"}]}` && !strings.Contains(got, `"text":"hello"`) {
		t.Errorf("echo: %s", got)
	}
	// A request from the server and the client's answer pass both ways.
	h.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sample","arguments":{}}}`)
	if m := h.next(); m["method"] != "sampling/createMessage" || m["id"] != "s1" {
		t.Fatalf("sampling request: %v", m)
	}
	h.send(`{"jsonrpc":"2.0","id":"s1","result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}}`)
	if m := h.next(); !strings.Contains(mustJSON(m), "sampled") {
		t.Errorf("sampling result: %v", m)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestBadInputFromTheClient(t *testing.T) {
	j := testJudge(t, "")
	j.Config.MaxMessageBytes = 1000
	h := newHarness(t, j, echoTool)
	cases := []struct {
		name, line string
		code       int
		id         any
	}{
		{"not JSON", `{"jsonrpc":"2.0","id":1,`, -32700, nil},
		{"an array batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, -32600, nil},
		{"no jsonrpc", `{"id":2,"method":"ping"}`, -32600, 2.0},
		{"a bad id", `{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, -32600, nil},
		{"a line over the limit", `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"p":"` + strings.Repeat("y", 2000) + `"}}`, -32600, 3.0},
		{"tools/call without a name", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}`, -32602, 4.0},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"a\xff\"}}}", -32700, 5.0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.send(c.line)
			m := h.next()
			if errCode(m) != c.code || m["id"] != c.id {
				t.Errorf("got %v, want code %d id %v", m, c.code, c.id)
			}
		})
	}
	// After all that, the connection still works.
	h.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if m := h.next(); m["id"] != 5.0 || m["result"] == nil {
		t.Errorf("ping after bad input: %v", m)
	}
}

func TestDuplicateIDInFlight(t *testing.T) {
	j := testJudge(t, "")
	h := newHarness(t, j, fakeTool{Name: "hang", Description: "Waits", InputSchema: json.RawMessage(objSchema)})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang","arguments":{}}}`)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	m := h.next()
	if errCode(m) != -32600 || !strings.Contains(errMessage(m), "duplicate request id 1") {
		t.Errorf("duplicate id: %v", m)
	}
	// "1" is another id than 1.
	h.send(`{"jsonrpc":"2.0","id":"1","method":"ping"}`)
	if m := h.next(); m["id"] != "1" || m["result"] == nil {
		t.Errorf("string id: %v", m)
	}
}

// TestServerHangsMidCall: the call times out on the proxy's clock, at
// its deadline exactly (the timer is armed for it, not a polling tick),
// and the server is told to cancel it.
func TestServerHangsMidCall(t *testing.T) {
	j := testJudge(t, "")
	j.Config.CallTimeout = 2 * time.Second
	fake := clock.NewFake(time.Unix(1000, 0))
	h := newHarnessClock(t, j, fake)
	armed := fake.Armed()
	h.send(`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"hang","arguments":{}}}`)
	<-armed
	for {
		if d, ok := fake.Next(); ok && d.Equal(time.Unix(1002, 0)) {
			break
		}
		armed = fake.Armed()
		if d, ok := fake.Next(); ok && d.Equal(time.Unix(1002, 0)) {
			break
		}
		<-armed
	}
	fake.Set(time.Unix(1002, 0))
	m := h.next()
	if errCode(m) != CodeTimeout || m["id"] != "h" {
		t.Errorf("hang: %v", m)
	}
	if got := <-h.srv.cancelled; got != `"h"` {
		t.Errorf("the server was sent a cancellation for %s", got)
	}
}

func TestServerCrashesMidCall(t *testing.T) {
	h := newHarness(t, testJudge(t, ""))
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang","arguments":{}}}`)
	h.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crash","arguments":{}}}`)
	got := map[float64]int{}
	for range 2 {
		m := h.next()
		got[m["id"].(float64)] = errCode(m)
	}
	if got[1] != CodeServerGone || got[2] != CodeServerGone {
		t.Errorf("calls in flight when the server went: %v", got)
	}
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not end when the server went")
	}
}

func TestRefusedCallNeverReachesTheServer(t *testing.T) {
	j := testJudge(t, "checks:\n  banned: {terms: [rm -rf]}\n")
	h := newHarness(t, j, echoTool)
	cases := []struct {
		name, args, reason string
	}{
		{"a secret in the arguments", `{"message":"use key AKIA2E3ZQF7B2LMC4XRW"}`, "secret_leak"},
		{"a banned term", `{"message":"then run rm -rf on it"}`, "banned_content"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.send(`{"jsonrpc":"2.0","id":` + string(rune('1'+i)) + `,"method":"tools/call","params":{"name":"echo","arguments":` + c.args + `}}`)
			m := h.next()
			if errCode(m) != CodeRefused || !strings.Contains(errMessage(m), "aegis_"+c.reason) {
				t.Errorf("got %v, want a refusal naming aegis_%s", m, c.reason)
			}
			data := m["error"].(map[string]any)["data"].(map[string]any)
			if data["reason"] != c.reason {
				t.Errorf("data.reason = %v", data["reason"])
			}
		})
	}
	h.send(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	h.next()
	if seen := h.srv.seen(); len(seen) != 0 {
		t.Errorf("the server saw refused calls: %v", seen)
	}
}

func TestCallPolicyHook(t *testing.T) {
	j := testJudge(t, "")
	var got []string
	j.Calls = CallPolicyFunc(func(_ context.Context, server string, c validatorToolCall) *validatorVerdict {
		got = append(got, server+"/"+c.Name+" "+c.Arguments)
		if c.Name == "echo" && strings.Contains(c.Arguments, "deny-me") {
			return failVerdict("malformed_tool_call", 2, findingOf("tool_policy", "malformed_tool_call", "denied by rule"))
		}
		return nil
	})
	h := newHarness(t, j, echoTool)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"deny-me"}}}`)
	if m := h.next(); errCode(m) != CodeRefused || !strings.Contains(errMessage(m), "aegis_malformed_tool_call") {
		t.Errorf("denied call: %v", m)
	}
	h.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"fine"}}}`)
	if m := h.next(); m["result"] == nil {
		t.Errorf("allowed call: %v", m)
	}
	if len(got) != 2 || got[0] != `fake/echo {"message":"deny-me"}` {
		t.Errorf("the policy saw %q", got)
	}
}

func TestResults(t *testing.T) {
	cases := []struct {
		name, policy, tool string
		want, notWant      string
		isError            bool
	}{
		{"a secret is redacted", "", "secret", redactionMark, "AKIA2E3ZQF7B2LMC4XRW", false},
		{"a secret refuses by policy", "mcp: {secrets: refuse}\n", "secret", "aegis_secret_leak", "AKIA2E3ZQF7B2LMC4XRW", true},
		{"injected instructions are withheld", "", "inject", "aegis_prompt_injection", "id_rsa", true},
		{"an oversized result is withheld", "mcp: {max_result_bytes: 1000}\n", "big", "aegis_length_exceeded", "xxxxxxxx", true},
		{"a clean result passes", "", "echo", `"type":"text"`, "aegis", false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, testJudge(t, c.policy))
			h.send(`{"jsonrpc":"2.0","id":` + string(rune('1'+i)) + `,"method":"tools/call","params":{"name":"` + c.tool + `","arguments":{}}}`)
			m := h.next()
			s := mustJSON(m)
			res, _ := m["result"].(map[string]any)
			if res == nil || !strings.Contains(s, c.want) || strings.Contains(s, c.notWant) || (res["isError"] == true) != c.isError {
				t.Errorf("got %s", s)
			}
		})
	}
}

func TestRealProcessExitsWithTheClient(t *testing.T) {
	if _, err := exec.LookPath("cat"); err != nil {
		t.Skip("no cat")
	}
	// cat echoes every request back: the proxy sees each as a request
	// from the server and passes it on.
	j := testJudge(t, "")
	p := &Proxy{Judge: j, Server: "cat"}
	in := strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/x","params":{"a":1}}` + "\n")
	var out bytes.Buffer
	cmd := exec.Command("cat")
	cmd.Stderr = os.Stderr
	if err := p.RunStdio(context.Background(), in, &out, cmd); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != `{"jsonrpc":"2.0","method":"notifications/x","params":{"a":1}}`+"\n" {
		t.Errorf("got %q", got)
	}
}

func TestServerExitStatusIsReported(t *testing.T) {
	j := testJudge(t, "")
	p := &Proxy{Judge: j, Server: "false"}
	pr, pw := io.Pipe()
	defer pw.Close()
	var out bytes.Buffer
	err := p.RunStdio(context.Background(), pr, &out, exec.Command("sh", "-c", "exit 3"))
	var ee *exec.ExitError
	if err == nil || !errorsAs(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("err = %v, want exit status 3", err)
	}
}

func TestTextIsLoggedOnlyWithLogText(t *testing.T) {
	for _, logText := range []bool{false, true} {
		policy := ""
		if logText {
			policy = "log_text: true\n"
		}
		h := newHarness(t, testJudge(t, policy), echoTool)
		h.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"key AKIA2E3ZQF7B2LMC4XRW"}}}`)
		h.next()
		var text string
		for len(h.sub.C) > 0 {
			if e := <-h.sub.C; e.Kind == events.Halt {
				text = e.Text
			}
		}
		if (text != "") != logText || (logText && !strings.Contains(text, "AKIA2E3ZQF7B2LMC4XRW")) {
			t.Errorf("log_text %v: the incident's text is %q", logText, text)
		}
	}
}

func TestServerIgnoringEOFIsKilled(t *testing.T) {
	old := ShutdownGrace
	ShutdownGrace = 200 * time.Millisecond
	defer func() { ShutdownGrace = old }()
	p := &Proxy{Judge: testJudge(t, ""), Server: "sleep"}
	start := time.Now()
	var out bytes.Buffer
	err := p.RunStdio(context.Background(), strings.NewReader(""), &out, exec.Command("sleep", "60"))
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("err = %v, want the server killed", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s", d)
	}
}
