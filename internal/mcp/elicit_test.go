package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const approvePolicy = "approval: {timeout: 5m}\nchecks:\n  tool_policy: {deny: [echo]}\nactions:\n  malformed_tool_call: {action: approve}\n"

func echoCall(id int, msg string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":%q}}}`, id, msg)
}

// TestElicitApproval: a call the policy sends to a person is held and the
// client (which declared elicitation) is asked; accept with approve:
// true sends it to the server, a decline refuses it. The question names
// the tool and argument paths, never a value.
func TestElicitApproval(t *testing.T) {
	h := newHarness(t, testJudge(t, approvePolicy), fakeTool{Name: "echo", Description: "Echoes", InputSchema: json.RawMessage(objSchema)})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	h.next()
	h.send(echoCall(2, "Quartz-Lantern-7731"))
	raw := h.nextRaw()
	var ask struct {
		ID     string `json:"id"`
		Method string `json:"method"`
		Params struct {
			Message string `json:"message"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(raw), &ask); err != nil || ask.Method != "elicitation/create" ||
		!strings.Contains(ask.Params.Message, `"echo" (arguments: message)`) || strings.Contains(raw, "Quartz") {
		t.Fatalf("the client was not asked, or was shown the value: %s", raw)
	}
	if len(h.srv.seen()) != 0 {
		t.Fatal("the server saw the call before the approval")
	}
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{"action":"accept","content":{"approve":true}}}`, ask.ID))
	if m := h.next(); m["result"] == nil || !strings.Contains(fmt.Sprint(m["result"]), "Quartz-Lantern-7731") {
		t.Fatalf("approved call: %v", m)
	}
	h.send(echoCall(3, "second"))
	if err := json.Unmarshal([]byte(h.nextRaw()), &ask); err != nil || ask.Method != "elicitation/create" {
		t.Fatal("the second call was not asked about")
	}
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{"action":"decline"}}`, ask.ID))
	if m := h.next(); errCode(m) != CodeRefused || !strings.Contains(errMessage(m), "did not approve") || m["id"] != float64(3) {
		t.Fatalf("declined call: %v", m)
	}
	if n := len(h.srv.seen()); n != 1 {
		t.Errorf("the server saw %d calls, want the approved one", n)
	}
}

// TestElicitNotDeclared: a client without the elicitation capability is
// not asked: the call is refused.
func TestElicitNotDeclared(t *testing.T) {
	h := newHarness(t, testJudge(t, approvePolicy), fakeTool{Name: "echo", Description: "Echoes", InputSchema: json.RawMessage(objSchema)})
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	h.next()
	h.send(echoCall(2, "x"))
	if m := h.next(); errCode(m) != CodeRefused {
		t.Fatalf("call without an approver: %v", m)
	}
}
