package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/store"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// writeIncidents fills a log the way aegis serve would, then closes it, so
// the command reads what a previous process wrote.
func writeIncidents(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "incidents.db")
	st, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	incs := []store.Incident{
		{Time: now.Add(-3 * time.Hour), Kind: store.KindRetry, RequestID: "req-old", Upstream: "llama", Model: "stories", Gateway: "box-8081",
			Reason: validator.ReasonInvalidJSON, Action: validator.ActionRetryStricterFormat, Risk: validator.RiskLow,
			Findings: []validator.Finding{{Check: "json_syntax", Reason: validator.ReasonInvalidJSON, Start: 7, End: 8, Message: "unexpected 'x'"}}},
		{Time: now.Add(-10 * time.Minute), Kind: store.KindHalt, RequestID: "req-loop", Route: "/v1/chat/completions",
			Upstream: "llama", Model: "stories", Attempt: 3, Reason: validator.ReasonRepetitionLoop, Action: validator.ActionHalt,
			Risk: validator.RiskMedium, Text: "Once upon a time the cat the cat the cat the cat", HasText: true,
			Findings: []validator.Finding{{Check: "repetition", Reason: validator.ReasonRepetitionLoop, Start: 17, End: 48, Message: "\"the cat \" repeated 4 times"}},
			Timings:  store.Timings{TTFT: 15 * time.Millisecond, VerdictDelay: 120 * time.Microsecond, Duration: 800 * time.Millisecond, HeldBytes: 24, Tokens: 14}},
	}
	for i := range incs {
		if _, err := st.Add(context.Background(), &incs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestIncidentsList(t *testing.T) {
	db := writeIncidents(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string // substrings of stdout
		notWant  []string
		wantErr  string
	}{
		{name: "all newest first", args: []string{"--db", db}, want: []string{"ID", "2 ", "halt", "repetition_loop", "req-loop", "1 ", "req-old"}},
		{name: "since", args: []string{"--db", db, "--since", "1h"}, want: []string{"req-loop"}, notWant: []string{"req-old"}},
		{name: "since days", args: []string{"--db", db, "--since", "1d"}, want: []string{"req-loop", "req-old"}},
		{name: "reason", args: []string{"--db", db, "--reason", "invalid_json"}, want: []string{"req-old"}, notWant: []string{"req-loop"}},
		{name: "kind", args: []string{"--db", db, "--kind", "halt"}, want: []string{"req-loop"}, notWant: []string{"req-old"}},
		{name: "gateway on a local log", args: []string{"--db", db, "--gateway", "box-8081"}, want: []string{"req-old"}, notWant: []string{"req-loop"}},
		{name: "nothing matches", args: []string{"--db", db, "--reason", "stall"}, want: []string{"no incidents in"}},
		{name: "unknown reason", args: []string{"--db", db, "--reason", "oops"}, wantCode: ExitUsage, wantErr: "unknown reason"},
		{name: "bad since", args: []string{"--db", db, "--since", "yesterday"}, wantCode: ExitUsage, wantErr: "--since"},
		{name: "missing log", args: []string{"--db", filepath.Join(t.TempDir(), "nope.db")}, wantCode: ExitFailure, wantErr: "no incident log at"},
		{name: "show needs an id", args: []string{"show", "--db", db}, wantCode: ExitUsage, wantErr: "needs an incident ID"},
		{name: "show bad id", args: []string{"show", "--db", db, "x"}, wantCode: ExitUsage, wantErr: "positive number"},
		{name: "show unknown id", args: []string{"show", "--db", db, "99"}, wantCode: ExitFailure, wantErr: "no incident 99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runCLI(t, append([]string{"incidents"}, tt.args...)...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.wantCode, errs)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out, w) {
					t.Errorf("stdout has %q:\n%s", w, out)
				}
			}
			if !strings.Contains(errs, tt.wantErr) {
				t.Errorf("stderr lacks %q: %s", tt.wantErr, errs)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), "nope.db")); err == nil {
		t.Error("listing a missing log created it")
	}
}

func TestIncidentsJSON(t *testing.T) {
	db := writeIncidents(t)
	out, errs, code := runCLI(t, "incidents", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %d:\n%s", len(lines), out)
	}
	var inc store.Incident
	if err := json.Unmarshal([]byte(lines[0]), &inc); err != nil {
		t.Fatal(err)
	}
	if inc.ID != 2 || inc.Reason != validator.ReasonRepetitionLoop || inc.Findings[0].Start != 17 || inc.Text == "" {
		t.Errorf("first JSON incident = %+v", inc)
	}
	out, _, _ = runCLI(t, "incidents", "show", "--db", db, "--json", "2")
	var shown struct {
		Segments []store.Segment `json:"segments"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatal(err)
	}
	if len(shown.Segments) != 2 || shown.Segments[1].Text != "the cat the cat the cat the cat" {
		t.Errorf("segments = %+v", shown.Segments)
	}
}

func TestIncidentsShowGolden(t *testing.T) {
	t.Setenv("TZ", "UTC")
	db := writeIncidents(t)
	for _, id := range []string{"1", "2"} {
		out, errs, code := runCLI(t, "incidents", "show", "--db", db, id)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		// The time line changes every run; everything else is golden.
		var kept []string
		for _, l := range strings.Split(out, "\n") {
			if !strings.HasPrefix(l, "time ") {
				kept = append(kept, l)
			}
		}
		got := strings.Join(kept, "\n")
		golden := filepath.Join("testdata", "incident_show_"+id+".golden")
		if *update {
			os.WriteFile(golden, []byte(got), 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("show %s:\n got:\n%s\nwant:\n%s", id, got, want)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"1h", now.Add(-time.Hour), false},
		{"90m", now.Add(-90 * time.Minute), false},
		{"2d", now.Add(-48 * time.Hour), false},
		{"2026-11-21T08:00:00Z", time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC), false},
		{"-1h", time.Time{}, true},
		{"soon", time.Time{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSince(tt.in, now)
			if (err != nil) != tt.err || !got.Equal(tt.want) {
				t.Errorf("parseSince(%q) = %v, %v", tt.in, got, err)
			}
		})
	}
}

func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"1h", "90m", "2d", "0.5d", "2026-11-21T08:00:00Z", "-1h", "soon", "d", ""} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseSince(s, now)
		if err == nil && got.After(now) && !strings.Contains(s, "T") {
			t.Fatalf("parseSince(%q) = %v: a duration must not reach into the future", s, got)
		}
	})
}

func TestIncidentShowANSI(t *testing.T) {
	inc := store.Incident{ID: 7, Kind: store.KindHalt, RequestID: "r", Reason: validator.ReasonSecretLeak, Action: validator.ActionHalt,
		Risk: validator.RiskHigh, Text: "key sk-123 end", HasText: true,
		Findings: []validator.Finding{{Check: "secret", Reason: validator.ReasonSecretLeak, Start: 4, End: 10, Message: "API key"}}}
	var b bytes.Buffer
	writeIncident(&b, inc, true)
	if !strings.Contains(b.String(), "key "+ansiOpen+"sk-123"+ansiClose+" end") || strings.Contains(b.String(), markOpen) {
		t.Errorf("terminal output:\n%q", b.String())
	}
}
