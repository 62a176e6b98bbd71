package stall

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
	"go.yaml.in/yaml/v3"
)

var t0 = time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)

// step is one event of a fake-clock schedule: advance the clock by d,
// then write text (if any), then tick (unless noTick).
type step struct {
	d      time.Duration
	text   string
	noTick bool
}

func runSchedule(w *Watchdog, steps []step) time.Time {
	now := t0
	for _, s := range steps {
		now = now.Add(s.d)
		if s.text != "" {
			w.Write([]byte(s.text))
		}
		if !s.noTick {
			w.Tick(now)
		}
	}
	return now
}

func TestWatchdogTable(t *testing.T) {
	s := func(v int) time.Duration { return time.Duration(v) * time.Second }
	def := *DefaultConfig()
	cases := []struct {
		name     string
		cfg      Config
		start    time.Time
		steps    []step
		wantKind string // "" = pass
		carry    int    // Carry before the schedule: a retry's released text
	}{
		{"steady stream", def, time.Time{}, []step{{0, "", false}, {s(1), "Hello", false}, {s(5), " world", false}, {s(14), ".", false}}, "", 0},
		{"first token just in time", def, time.Time{}, []step{{0, "", false}, {s(29), "Hi", false}}, "", 0},
		{"no first token", def, time.Time{}, []step{{0, "", false}, {s(30), "", false}}, "ttft", 0},
		{"first token late, timer tick fires first", def, time.Time{}, []step{{0, "", false}, {s(31), "", false}, {0, "late", false}}, "ttft", 0},
		{"gap exceeded", def, time.Time{}, []step{{0, "", false}, {s(1), "a", false}, {s(15), "", false}}, "gap", 0},
		{"gap just under", def, time.Time{}, []step{{0, "", false}, {s(1), "a", false}, {s(14), "", false}, {time.Millisecond * 999, "b", false}}, "", 0},
		{"gap resets on each chunk", def, time.Time{}, []step{{0, "", false}, {s(10), "a", false}, {s(10), "b", false}, {s(10), "c", false}, {s(10), "d", false}}, "", 0},
		{"total exceeded while streaming", Config{Total: Duration(s(20)), Gap: Duration(s(15))}, time.Time{}, []step{{0, "", false}, {s(5), "a", false}, {s(10), "b", false}, {s(5), "c", false}}, "total", 0},
		{"ttft off waits forever", Config{}, time.Time{}, []step{{0, "", false}, {time.Hour, "", false}}, "", 0},
		{"explicit start", def, t0.Add(-s(40)), []step{{0, "", false}}, "ttft", 0},
		{"write before first tick counts at the first tick", def, time.Time{}, []step{{0, "x", true}, {s(2), "", false}, {s(14), "", false}}, "", 0},
		{"write without tick then long silence", def, time.Time{}, []step{{0, "", false}, {s(1), "x", true}, {s(16), "", false}, {s(16), "", false}}, "gap", 0},
		{"gap off, ttft on", Config{TTFT: Duration(s(5))}, time.Time{}, []step{{0, "", false}, {s(1), "a", false}, {time.Hour, "", false}}, "", 0},
		{"carried text is no first token", def, time.Time{}, []step{{0, "Hello", false}, {s(20), "", false}, {s(9), " world", false}}, "", 5},
		{"carried text, then a prefill too long", def, time.Time{}, []step{{0, "Hello", false}, {s(30), "", false}}, "ttft", 5},
		{"carried text, then output, then a gap", def, time.Time{}, []step{{0, "ab", false}, {s(20), "c", false}, {s(15), "", false}}, "gap", 2},
		{"a write longer than the carry is output", def, time.Time{}, []step{{0, "abc", false}, {s(15), "", false}}, "gap", 2},
		{"carry spread over writes", def, time.Time{}, []step{{0, "ab", false}, {0, "cd", false}, {s(25), "", false}}, "", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := New(c.cfg, Options{Start: c.start})
			w.Carry(c.carry)
			runSchedule(w, c.steps)
			fs := w.Findings()
			if c.wantKind == "" {
				if len(fs) != 0 {
					t.Fatalf("want pass, got %+v", fs)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("want one %s finding, got %+v", c.wantKind, fs)
			}
			f := fs[0]
			if f.Reason != validator.ReasonStall || f.Check != Name || !strings.HasPrefix(f.Message, c.wantKind+":") {
				t.Fatalf("finding %+v, want %s stall", f, c.wantKind)
			}
			if f.Start != f.End || f.End > w.written {
				t.Fatalf("finding at %d..%d, want an empty range within the %d bytes written", f.Start, f.End, w.written)
			}
		})
	}
}

func TestNextDeadline(t *testing.T) {
	w := New(*DefaultConfig(), Options{})
	if !w.NextDeadline().IsZero() {
		t.Fatal("deadline before the first tick")
	}
	w.Tick(t0)
	if got, want := w.NextDeadline(), t0.Add(30*time.Second); !got.Equal(want) {
		t.Fatalf("ttft deadline %v, want %v", got, want)
	}
	w.Write([]byte("a"))
	w.Tick(t0.Add(2 * time.Second))
	if got, want := w.NextDeadline(), t0.Add(17*time.Second); !got.Equal(want) {
		t.Fatalf("gap deadline %v, want %v", got, want)
	}
	w.Tick(w.NextDeadline())
	if len(w.Findings()) != 1 {
		t.Fatal("tick at the deadline did not fire")
	}
	if !w.NextDeadline().IsZero() {
		t.Fatal("deadline after a finding")
	}
	c := New(*DefaultConfig(), Options{})
	c.Tick(t0)
	c.Close()
	c.Tick(t0.Add(time.Hour))
	if len(c.Findings()) != 0 || !c.NextDeadline().IsZero() {
		t.Fatal("closed watchdog still fires")
	}
}

func TestNeverHoldsText(t *testing.T) {
	for _, text := range []string{"", "hello world", strings.Repeat("stream ", 100), "héllo wörld ✓"} {
		fs := validatortest.SplitIndependent(t, func() validator.Validator { return New(*DefaultConfig(), Options{}) }, text)
		if len(fs) != 0 {
			t.Fatalf("text alone caused findings: %+v", fs)
		}
	}
	w := New(*DefaultConfig(), Options{})
	w.Write([]byte("abc"))
	if w.Settled() != 3 {
		t.Fatal("settled is not everything written")
	}
}

func TestSpecExampleDecodes(t *testing.T) {
	spec, ok := testRegistry.Lookup(Name)
	if !ok {
		t.Fatal("not registered")
	}
	cfg := spec.Config().(*Config)
	dec := yaml.NewDecoder(strings.NewReader(spec.Example))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		t.Fatalf("example: %v", err)
	}
	if cfg.Total != Duration(5*time.Minute) || cfg.TTFT != Duration(30*time.Second) {
		t.Fatalf("decoded %+v", cfg)
	}
	var j Config
	if err := json.Unmarshal([]byte(`{"ttft":"2s","gap":"1s","total":"0s"}`), &j); err != nil || j.TTFT != Duration(2*time.Second) {
		t.Fatalf("json: %+v %v", j, err)
	}
	if err := yaml.Unmarshal([]byte("ttft: -1s\n"), &j); err == nil {
		t.Fatal("negative duration accepted")
	}
	if err := yaml.Unmarshal([]byte("ttft: 30\n"), &j); err == nil {
		t.Fatal("unitless duration accepted")
	}
	v, err := spec.New(nil, &validator.Request{})
	if err != nil || v == nil || v.Name() != Name {
		t.Fatalf("New: %v %v", v, err)
	}
}

// FuzzWatchdog drives the watchdog with a random schedule and checks the
// Ticker contract: a tick before NextDeadline never fires, a tick at it
// always does, and at most one finding is reported.
func FuzzWatchdog(f *testing.F) {
	f.Add([]byte{0, 10, 1, 200, 3}, uint8(30), uint8(15), uint8(0))
	f.Add([]byte{5, 5, 5, 5}, uint8(3), uint8(2), uint8(9))
	f.Add([]byte{}, uint8(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, sched []byte, ttft, gap, total uint8) {
		w := New(Config{TTFT: Duration(ttft) * Duration(time.Second), Gap: Duration(gap) * Duration(time.Second), Total: Duration(total) * Duration(time.Second)}, Options{})
		now := t0
		w.Tick(now)
		for _, b := range sched {
			if b&1 == 1 {
				w.Write([]byte("tok"))
			}
			next := w.NextDeadline()
			now = now.Add(time.Duration(b>>1) * time.Second / 4)
			before := len(w.Findings())
			w.Tick(now)
			fired := len(w.Findings()) > before
			if before > 0 {
				if fired {
					t.Fatal("second finding")
				}
				continue
			}
			if b&1 == 0 && !next.IsZero() && !now.Before(next) && !fired {
				t.Fatalf("tick at %v past deadline %v did not fire", now, next)
			}
			if fired && (next.IsZero() || now.Before(next)) {
				t.Fatalf("fired at %v before deadline %v", now, next)
			}
		}
		if len(w.Findings()) > 1 {
			t.Fatal("more than one finding")
		}
	})
}

func BenchmarkWatchdogChunk(b *testing.B) {
	chunk := bytes.Repeat([]byte("x"), 16)
	w := New(*DefaultConfig(), Options{})
	now := t0
	w.Tick(now)
	b.ReportAllocs()
	b.SetBytes(16)
	for i := 0; i < b.N; i++ {
		now = now.Add(10 * time.Millisecond)
		w.Write(chunk)
		w.Tick(now)
		_ = w.NextDeadline()
		_ = w.Settled()
	}
}

// testRegistry holds the checks this package's tests look up.
var testRegistry = func() *validator.Registry {
	r := &validator.Registry{}
	Register(r)
	return r
}()
