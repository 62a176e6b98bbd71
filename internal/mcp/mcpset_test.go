package mcp

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
)

// mcpCase is one server behaviour of testdata/mcpset: a client request
// and the server's answer to it, or a request the server sends the
// client. Poisoned cases must be caught (refused, hidden, withheld or
// marked where the model reads them); benign ones pass byte for byte.
type mcpCase struct {
	Name     string          `json:"name"`
	Kind     string          `json:"kind"`
	Poisoned bool            `json:"poisoned"`
	Method   string          `json:"method"`
	Params   json.RawMessage `json:"params"`
	Result   json.RawMessage `json:"result"`
	Server   *struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"server_request"`
}

// runMCPCase plays c through a fresh session and reports whether what
// the client (and so the model) gets differs from what the server sent,
// and whether the poisoning was caught.
func runMCPCase(t *testing.T, j *Judge, c mcpCase) (changed, caught bool) {
	t.Helper()
	p := &Proxy{Judge: j, Server: "set", Bus: &events.Bus{}}
	s := p.NewSession()
	var replied []byte
	s.reply = func(b []byte) { replied = b }
	if c.Server != nil {
		raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": c.Server.Method, "params": c.Server.Params})
		out := s.FromServer(t.Context(), raw)
		changed = !bytes.Equal(out, raw) || replied != nil
		return changed, out == nil && replied != nil
	}
	params := c.Params
	if params == nil {
		params = json.RawMessage(`{}`)
	}
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": c.Method, "params": params})
	if up, back := s.FromClient(t.Context(), req); up == nil {
		t.Fatalf("%s: the request was refused: %s", c.Name, back)
	}
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": c.Result})
	out := s.FromServer(t.Context(), raw)
	changed = !bytes.Equal(out, raw)
	var got struct {
		Error  json.RawMessage `json:"error"`
		Result map[string]json.RawMessage
	}
	_ = json.Unmarshal(out, &got)
	var sent map[string]json.RawMessage
	_ = json.Unmarshal(c.Result, &sent)
	switch {
	case got.Error != nil, strings.Contains(string(out), "Aegis warning"):
		caught = true
	case string(got.Result["isError"]) == "true":
		caught = true
	default:
		for _, k := range []string{"tools", "prompts", "resources", "resourceTemplates"} {
			var a, b []json.RawMessage
			if json.Unmarshal(sent[k], &a) == nil && json.Unmarshal(got.Result[k], &b) == nil && len(b) < len(a) {
				caught = true
			}
		}
	}
	return changed, caught
}

// TestMCPSet plays the poisoned and benign servers of testdata/mcpset
// through the judge with the default policy: train.json is the part the
// screens were tuned on, heldout.json the part they were not. Together at
// least 32 of 36 poisonings are caught and at most 1 of 16 benign
// look-alikes is changed.
func TestMCPSet(t *testing.T) {
	j := testJudge(t, "")
	total := map[bool]int{}
	hits := map[bool]int{}
	for _, part := range []string{"train", "heldout"} {
		b, err := os.ReadFile(filepath.Join("testdata", "mcpset", part+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var cases []mcpCase
		if err := json.Unmarshal(b, &cases); err != nil {
			t.Fatalf("%s.json: %v", part, err)
		}
		var caughtN, poisonN, changedN, benignN int
		for _, c := range cases {
			changed, caught := runMCPCase(t, j, c)
			if c.Poisoned {
				poisonN++
				if caught {
					caughtN++
				} else {
					t.Logf("%s: missed %s (%s)", part, c.Name, c.Kind)
				}
			} else {
				benignN++
				if changed {
					changedN++
					t.Logf("%s: changed benign %s (%s)", part, c.Name, c.Kind)
				}
			}
		}
		t.Logf("%s: %d of %d poisonings caught, %d of %d benign changed", part, caughtN, poisonN, changedN, benignN)
		total[true] += poisonN
		hits[true] += caughtN
		total[false] += benignN
		hits[false] += changedN
	}
	if total[true] != 36 || total[false] != 16 {
		t.Fatalf("the set holds %d poisonings and %d benign cases, want 36 and 16", total[true], total[false])
	}
	if hits[true] < 32 {
		t.Errorf("%d of 36 poisonings caught, want at least 32", hits[true])
	}
	if hits[false] > 1 {
		t.Errorf("%d of 16 benign cases changed, want at most 1", hits[false])
	}
}

// TestCollidingToolNames: a tool another server already lists (or one
// that looks like it) with another description is listed with the
// warning in band; the same tool from two servers passes unchanged.
func TestCollidingToolNames(t *testing.T) {
	ctx := t.Context()
	pins, err := OpenPins(ctx, filepath.Join(t.TempDir(), "pins.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer pins.Close()
	j := testJudge(t, "")
	j.Pins = pins
	list := func(server string, tools ...fakeTool) []byte {
		p := &Proxy{Judge: j, Server: server, Bus: &events.Bus{}}
		s := p.NewSession()
		s.FromClient(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"tools": tools}})
		out := s.FromServer(ctx, raw)
		if bytes.Equal(out, raw) {
			return nil
		}
		return out
	}
	search := fakeTool{Name: "search", Description: "Searches the web.", InputSchema: json.RawMessage(objSchema)}
	if out := list("web", search); out != nil {
		t.Fatalf("first listing changed: %s", out)
	}
	if out := list("web2", search); out != nil {
		t.Errorf("the same tool from a second server changed: %s", out)
	}
	other := fakeTool{Name: "search", Description: "Searches your e-mail.", InputSchema: json.RawMessage(objSchema)}
	if out := list("mail", other); !strings.Contains(string(out), "Aegis warning") {
		t.Errorf("a colliding name was not marked: %s", out)
	}
}
