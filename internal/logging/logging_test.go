package logging

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

func TestFormatChoice(t *testing.T) {
	tests := []struct {
		name     string
		format   Format
		wantJSON bool
	}{
		{"auto on a buffer is json", Auto, true},
		{"forced text", Text, false},
		{"forced json", JSON, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			New(&b, Options{Format: tt.format}).Info("hello", "k", 1)
			if got := json.Valid(b.Bytes()); got != tt.wantJSON {
				t.Errorf("json=%v for %q", got, b.String())
			}
		})
	}
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a regular file is not a terminal")
	}
	for _, s := range []string{"", "auto", "json", "TEXT"} {
		if _, err := ParseFormat(s); err != nil {
			t.Errorf("ParseFormat(%q): %v", s, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Error("ParseFormat(xml) accepted")
	}
}

// TestOneLinePerRequest feeds two request lifecycles and checks that
// exactly one JSON line comes out per request, with its verdict, and that
// the output text never appears.
func TestOneLinePerRequest(t *testing.T) {
	var b bytes.Buffer
	r := &RequestLog{log: New(&b, Options{Format: JSON}), reqs: map[string]*reqState{}}
	loop := &validator.Verdict{Verdict: validator.Fail, Reason: validator.ReasonRepetitionLoop, Action: validator.ActionRetryWithCorrection,
		Findings: []validator.Finding{{Check: "repetition", Start: 10, End: 40}}}
	leak := &validator.Verdict{Verdict: validator.Fail, Reason: validator.ReasonSecretLeak, Action: validator.ActionHalt,
		Findings: []validator.Finding{{Check: "secret", Start: 3, End: 9}}}
	pass := &validator.Verdict{Verdict: validator.Pass, Action: validator.ActionRelease}
	for _, e := range []events.Event{
		{Kind: events.RequestStarted, RequestID: "a", Model: "stories"},
		{Kind: events.AttemptStarted, RequestID: "a", Attempt: 1},
		{Kind: events.Verdict, RequestID: "a", Verdict: loop, Text: "SECRET OUTPUT"},
		{Kind: events.Retry, RequestID: "a", Verdict: loop},
		{Kind: events.AttemptStarted, RequestID: "a", Attempt: 2},
		{Kind: events.Verdict, RequestID: "a", Verdict: pass},
		{Kind: events.RequestStarted, RequestID: "b"},
		{Kind: events.AttemptStarted, RequestID: "b", Attempt: 1},
		{Kind: events.Verdict, RequestID: "b", Verdict: leak},
		{Kind: events.Halt, RequestID: "b", Verdict: leak, Text: "SECRET OUTPUT"},
		{Kind: events.RequestFinished, RequestID: "a", Outcome: "repaired", Status: 200, TTFT: 12 * time.Millisecond},
		{Kind: events.RequestFinished, RequestID: "b", Outcome: "halted", Status: 200},
	} {
		r.Handle(e)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), b.String())
	}
	if strings.Contains(b.String(), "SECRET") {
		t.Error("output text leaked into the log")
	}
	type line struct {
		Level, Msg, RequestID, Outcome, Verdict, Reason, Action, Model string
		Attempts, Retries                                              int
		TTFT                                                           float64 `json:"ttft_ms"`
	}
	var got []line
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, line{Level: m["level"].(string), Msg: m["msg"].(string), RequestID: m["request_id"].(string),
			Outcome: m["outcome"].(string), Verdict: m["verdict"].(string), Reason: m["reason"].(string), Action: m["action"].(string),
			Model: m["model"].(string), Attempts: int(m["attempts"].(float64)), Retries: int(m["retries"].(float64)), TTFT: m["ttft_ms"].(float64)})
	}
	want := []line{
		{Level: "INFO", Msg: "request", RequestID: "a", Outcome: "repaired", Verdict: "pass", Action: "release", Model: "stories", Attempts: 2, Retries: 1, TTFT: 12},
		{Level: "WARN", Msg: "request", RequestID: "b", Outcome: "halted", Verdict: "fail", Reason: "secret_leak", Action: "halt", Attempts: 1},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if len(r.reqs) != 0 {
		t.Errorf("%d requests still tracked after finishing", len(r.reqs))
	}
}

// BenchmarkRequestLine is the request log's work for one plain request:
// its events applied and its line written.
func BenchmarkRequestLine(b *testing.B) {
	r := &RequestLog{log: New(io.Discard, Options{Format: JSON}), reqs: map[string]*reqState{}}
	pass := &validator.Verdict{Verdict: validator.Pass, Action: validator.ActionRelease}
	evs := []events.Event{
		{Kind: events.RequestStarted, RequestID: "a", Model: "stories"},
		{Kind: events.AttemptStarted, RequestID: "a", Attempt: 1},
		{Kind: events.Verdict, RequestID: "a", Verdict: pass},
		{Kind: events.RequestFinished, RequestID: "a", Route: "chat", Upstream: "up", Stream: true, Outcome: "released", Status: 200,
			TTFT: 2 * time.Millisecond, Duration: 30 * time.Millisecond, Tokens: 128},
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, e := range evs {
			r.Handle(e)
		}
	}
}
