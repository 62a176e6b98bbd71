package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// exfil is a finding of the flow rule's reason, as the tool policy
// reports private data going where nobody trusted asked it to go.
func exfil() validator.Finding {
	return validator.Finding{Check: "tool_policy", Reason: validator.ReasonDataExfiltration, Path: "tool_calls/0/arguments/body",
		Message: "`body` carries 31 bytes of the system prompt to a destination only a tool result named"}
}

// TestDataExfiltrationApproval: the default rule for private data to an
// unknown destination asks a person when the policy has an approval
// section, and refuses otherwise.
func TestDataExfiltrationApproval(t *testing.T) {
	toolCalls := SoFar{Attempts: 1, MaxAttempts: 4, ToolCalls: true}
	for _, tc := range []struct {
		name, doc  string
		wantAction validator.Action
		wantMove   Move
	}{
		{"no approver", "", validator.ActionHalt, Halt},
		{"approver configured", "approval: {timeout: 2m}\n", validator.ActionApprove, Approve},
		{"approver with the default timeout", "approval:\n", validator.ActionApprove, Approve},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.doc), "p.yaml", testRegistry())
			if err != nil {
				t.Fatal(err)
			}
			v := p.Decide([]validator.Finding{exfil()}, 1)
			if v.Verdict != validator.Fail || v.Reason != validator.ReasonDataExfiltration || v.Action != tc.wantAction {
				t.Fatalf("verdict = %+v, want fail data_exfiltration %s", v, tc.wantAction)
			}
			if m := p.Next(v, toolCalls); m != tc.wantMove {
				t.Errorf("next = %s, want %s", m, tc.wantMove)
			}
		})
	}
}

// TestApproveNeedsToolCalls: an approve verdict with nothing held (no
// tool call, or text already released optimistically) halts.
func TestApproveNeedsToolCalls(t *testing.T) {
	p, err := Parse([]byte("approval: {timeout: 1m}\n"), "p.yaml", testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	v := p.Decide([]validator.Finding{exfil()}, 1)
	for _, tc := range []struct {
		name string
		s    SoFar
		want Move
	}{
		{"tool calls held", SoFar{ToolCalls: true}, Approve},
		{"no tool call", SoFar{}, Halt},
		{"optimistic", SoFar{ToolCalls: true, Optimistic: true}, Halt},
		{"memory cap", SoFar{ToolCalls: true, Capped: true}, Halt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if m := p.Next(v, tc.s); m != tc.want {
				t.Errorf("next = %s, want %s", m, tc.want)
			}
		})
	}
}

// TestApproveLosesToRefusal: a refusal of equal risk beats asking a
// person, whatever the order of the findings.
func TestApproveLosesToRefusal(t *testing.T) {
	p, err := Parse([]byte("approval: {timeout: 1m}\n"), "p.yaml", testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	leak := validator.Finding{Check: "leak", Reason: validator.ReasonSecretLeak, Path: "tool_calls/0/arguments/body"}
	for _, fs := range [][]validator.Finding{{exfil(), leak}, {leak, exfil()}} {
		if v := p.Decide(fs, 1); v.Reason != validator.ReasonSecretLeak || v.Action != validator.ActionHalt {
			t.Errorf("%s first: verdict %s %s, want secret_leak halt", fs[0].Reason, v.Reason, v.Action)
		}
	}
}

// TestApprovalSection: the section's shape, timeout bounds and the
// policy version that approvals are bound to.
func TestApprovalSection(t *testing.T) {
	for _, tc := range []struct {
		name, doc, wantErr string
		timeout            time.Duration
	}{
		{"timeout", "approval: {timeout: 90s}\n", "", 90 * time.Second},
		{"default timeout", "approval: {}\n", "", DefaultApprovalTimeout},
		{"zero timeout", "approval: {timeout: 0s}\n", "line 1: approval: timeout \"0s\"", 0},
		{"too long", "approval: {timeout: 48h}\n", "up to 24h0m0s", 0},
		{"unknown key", "approval:\n  timout: 1m\n", "line 2: unknown field \"timout\"", 0},
		{"not a mapping", "approval: yes\n", "line 1: approval must be a mapping", 0},
		{"approve without approver", "actions:\n  unsafe_content: {action: approve}\n", "line 2: actions unsafe_content: action approve needs an approval section", 0},
		{"approve with approver", "approval: {timeout: 1m}\nactions:\n  unsafe_content: {action: approve}\n", "", time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.doc), "p.yaml", testRegistry())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "p.yaml") {
					t.Fatalf("err = %v, want one naming p.yaml and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !p.Approval.Enabled || p.ApprovalTimeout() != tc.timeout {
				t.Errorf("approval = %+v, timeout %s; want enabled, %s", p.Approval, p.ApprovalTimeout(), tc.timeout)
			}
		})
	}
	a, _ := Parse([]byte("approval: {timeout: 1m}\n"), "a.yaml", testRegistry())
	b, _ := Parse([]byte("approval: {timeout: 2m}\n"), "a.yaml", testRegistry())
	a2, _ := Parse([]byte("approval: {timeout: 1m}\n"), "other.yaml", testRegistry())
	if a.Version == b.Version || a.Version != a2.Version || !strings.HasPrefix(a.Version, "sha256:") || Default().Version != "default" {
		t.Errorf("versions %q %q %q %q: want one per content", a.Version, b.Version, a2.Version, Default().Version)
	}
}
