package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

func sample(i int) *Incident {
	return &Incident{
		Time:      time.Unix(1_800_000_000+int64(i), 0),
		Kind:      []Kind{KindRetry, KindHalt}[i%2],
		RequestID: fmt.Sprintf("req-%d", i),
		Route:     "/v1/chat/completions",
		Upstream:  "llama",
		Model:     "stories",
		Attempt:   1 + i%3,
		Reason:    []validator.Reason{validator.ReasonRepetitionLoop, validator.ReasonInvalidJSON}[i%2],
		Action:    []validator.Action{validator.ActionRetryWithCorrection, validator.ActionHalt}[i%2],
		Risk:      validator.RiskMedium,
		Findings: []validator.Finding{{Check: "repetition", Reason: validator.ReasonRepetitionLoop,
			Start: 3, End: 9, Message: "loop of 6 bytes"}},
		Timings: Timings{TTFT: 12 * time.Millisecond, VerdictDelay: 80 * time.Microsecond, Duration: time.Second, HeldBytes: 17},
		Text:    "abcabcabcabc",
		HasText: i%2 == 0,
	}
}

func open(t *testing.T, path string, o Options) *Store {
	t.Helper()
	s, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRoundTripSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "incidents.db")
	s := open(t, path, Options{})
	if m, err := s.JournalMode(ctx); err != nil || m != "wal" {
		t.Fatalf("journal mode = %q, %v; want wal", m, err)
	}
	var want []Incident
	for i := 0; i < 5; i++ {
		inc := sample(i)
		if _, err := s.Add(ctx, inc); err != nil {
			t.Fatal(err)
		}
		if !inc.HasText {
			inc.Text = ""
		}
		want = append(want, *inc)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, Options{})
	for _, w := range want {
		got, err := s.Get(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", w) {
			t.Errorf("after reopen:\n got %+v\nwant %+v", got, w)
		}
	}
	if _, err := s.Get(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(999) = %v, want ErrNotFound", err)
	}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "i.db"), Options{})
	for i := 0; i < 10; i++ {
		if _, err := s.Add(ctx, sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		f       Filter
		wantIDs []int64
	}{
		{"all newest first", Filter{}, []int64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}},
		{"limit", Filter{Limit: 2}, []int64{10, 9}},
		{"reason", Filter{Reason: validator.ReasonInvalidJSON}, []int64{10, 8, 6, 4, 2}},
		{"kind", Filter{Kind: KindRetry, Limit: 3}, []int64{9, 7, 5}},
		{"since", Filter{Since: time.Unix(1_800_000_007, 0)}, []int64{10, 9, 8}},
		{"nothing", Filter{Reason: validator.ReasonStall}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.List(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, g := range got {
				ids = append(ids, g.ID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(tt.wantIDs) {
				t.Errorf("ids = %v, want %v", ids, tt.wantIDs)
			}
		})
	}
}

func TestRetention(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_010, 0)
	tests := []struct {
		name     string
		opts     Options
		wantLeft []int64
	}{
		{"no limits", Options{}, []int64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}},
		{"max rows", Options{MaxRows: 3}, []int64{10, 9, 8}},
		{"max age", Options{MaxAge: 4500 * time.Millisecond}, []int64{10, 9, 8, 7}},
		{"both", Options{MaxRows: 2, MaxAge: time.Hour}, []int64{10, 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Clock = clock.NewFake(now)
			s := open(t, filepath.Join(t.TempDir(), "i.db"), tt.opts)
			for i := 0; i < 10; i++ {
				if _, err := s.Add(ctx, sample(i)); err != nil {
					t.Fatal(err)
				}
			}
			n, err := s.Prune(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := s.List(ctx, Filter{})
			var ids []int64
			for _, g := range got {
				ids = append(ids, g.ID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(tt.wantLeft) || int(n) != 10-len(tt.wantLeft) {
				t.Errorf("left %v (removed %d), want %v", ids, n, tt.wantLeft)
			}
		})
	}
}

func TestMigrationRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "i.db")
	s := open(t, path, Options{})
	if _, err := s.db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: err = %v", err)
	}
}

// crashChildEnv names the database a re-executed test binary writes to in
// a loop until it is killed (see TestCrashMidWrite).
const crashChildEnv = "AEGIS_STORE_CRASH_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	goleak.VerifyTestMain(m) // no goroutine outlives the tests

}

// crashChild adds incidents forever and prints the id of each one after
// its commit returned, so the parent knows what must survive.
func crashChild(path string) {
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		inc := sample(i)
		inc.Text = strings.Repeat("x", 4096) // big rows: the kill lands inside page writes
		inc.HasText = true
		id, err := s.Add(context.Background(), inc)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		fmt.Fprintf(w, "%d %s\n", id, inc.RequestID)
		w.Flush()
	}
}

// TestCrashMidWrite kills a writer process with SIGKILL while it is
// writing, then checks that every incident whose commit had returned is
// readable and that the database passes PRAGMA integrity_check.
func TestCrashMidWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.db")
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		committed := map[int64]string{}
		sc := bufio.NewScanner(out)
		target := 150 + 100*round
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			id, _ := strconv.ParseInt(f[0], 10, 64)
			committed[id] = f[1]
			if len(committed) == target {
				cmd.Process.Signal(syscall.SIGKILL)
				break
			}
		}
		for sc.Scan() { // lines written before the kill landed
			f := strings.Fields(sc.Text())
			id, _ := strconv.ParseInt(f[0], 10, 64)
			committed[id] = f[1]
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: child was not killed: %v; stderr: %s", round, err, stderr.String())
		}
		if len(committed) < target {
			t.Fatalf("round %d: child committed only %d incidents; stderr: %s", round, len(committed), stderr.String())
		}

		s, err := Open(path, Options{})
		if err != nil {
			t.Fatalf("round %d: reopen after crash: %v", round, err)
		}
		if err := s.IntegrityCheck(context.Background()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for id, req := range committed {
			inc, err := s.Get(context.Background(), id)
			if err != nil {
				t.Fatalf("round %d: committed incident lost: %v", round, err)
			}
			if inc.RequestID != req || len(inc.Text) != 4096 || len(inc.Findings) != 1 {
				t.Fatalf("round %d: incident %d damaged: %+v", round, id, inc)
			}
		}
		s.Close()
		t.Logf("round %d: %d committed incidents survived SIGKILL", round, len(committed))
	}
}

func TestSegments(t *testing.T) {
	f := func(s, e int) validator.Finding { return validator.Finding{Start: s, End: e} }
	tests := []struct {
		name     string
		text     string
		findings []validator.Finding
		want     string // segments rendered as [text] for marked, text otherwise
	}{
		{"none", "hello", nil, "hello"},
		{"middle", "hello world", []validator.Finding{f(6, 11)}, "hello [world]"},
		{"point", "{\"a\":x}", []validator.Finding{f(5, 6)}, "{\"a\":[x]}"},
		{"empty span marks one char", "abc", []validator.Finding{f(1, 1)}, "a[b]c"},
		{"overlap", "abcdef", []validator.Finding{f(1, 4), f(2, 5)}, "a[b][cd][e]f"},
		{"out of range clamped", "abc", []validator.Finding{f(-3, 99)}, "[abc]"},
		{"at end", "abc", []validator.Finding{f(3, 3)}, "ab[c]"},
		{"utf8 widened", "añb", []validator.Finding{f(2, 3)}, "a[ñ]b"},
		{"empty text", "", []validator.Finding{f(0, 1)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			for _, s := range Segments(tt.text, tt.findings) {
				if len(s.Findings) > 0 {
					b.WriteString("[" + s.Text + "]")
				} else {
					b.WriteString(s.Text)
				}
			}
			if b.String() != tt.want {
				t.Errorf("got %q, want %q", b.String(), tt.want)
			}
		})
	}
}

func FuzzSegments(f *testing.F) {
	f.Add("hello world", 6, 11, 2, 3)
	f.Add("añb", 2, 3, 0, 1)
	f.Add("", 0, 0, -1, 5)
	f.Fuzz(func(t *testing.T, text string, s1, e1, s2, e2 int) {
		segs := Segments(text, []validator.Finding{{Start: s1, End: e1}, {Start: s2, End: e2}})
		var b strings.Builder
		pos := 0
		for _, s := range segs {
			if s.Start != pos || s.End <= s.Start || text[s.Start:s.End] != s.Text {
				t.Fatalf("bad segment %+v at %d", s, pos)
			}
			pos = s.End
			b.WriteString(s.Text)
		}
		if b.String() != text {
			t.Fatalf("segments do not rebuild the text")
		}
	})
}
