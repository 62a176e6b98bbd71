package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

func openPG(t testing.TB, url string, opts Options) *Postgres {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p, err := OpenPostgres(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func pgIncident(req string, reason validator.Reason) *Incident {
	return &Incident{Kind: KindRetry, RequestID: req, Reason: reason, Action: validator.ActionRetryWithCorrection,
		Risk: validator.RiskMedium, Findings: []validator.Finding{{Check: "repetition", Reason: reason, Start: 3, End: 9}},
		Timings: Timings{TTFT: time.Millisecond, Tokens: 7}, Text: "some text", HasText: true}
}

// flushUntil writes the buffer, asking again while the restarted server
// still hands out connections broken by the restart.
func flushUntil(t *testing.T, p *Postgres) {
	t.Helper()
	var err error
	for range 50 {
		if err = p.Flush(context.Background()); err == nil && p.Buffered() == 0 {
			return
		}
	}
	t.Fatalf("buffer not written after the restart: %v (%d buffered)", err, p.Buffered())
}

func TestPostgresRoundTrip(t *testing.T) {
	pg := testbed.StartPostgres(t)
	ctx := context.Background()
	// Gateways starting together all migrate: the advisory lock serialises them.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := OpenPostgres(ctx, pg.URL, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err == nil {
				p.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent open: %v", err)
		}
	}
	p := openPG(t, pg.URL, Options{Gateway: "gw-a"})
	if v, err := p.SchemaVersion(ctx); err != nil || v != len(pgMigrations) {
		t.Fatalf("schema version %d, %v; want %d", v, err, len(pgMigrations))
	}
	in := pgIncident("r1", validator.ReasonRepetitionLoop)
	id, err := p.Add(ctx, in)
	if err != nil || id == 0 {
		t.Fatalf("Add = %d, %v", id, err)
	}
	halt := pgIncident("r2", validator.ReasonSecretLeak)
	halt.Kind, halt.HasText, halt.Text = KindHalt, false, ""
	if _, err := p.Add(ctx, halt); err != nil {
		t.Fatal(err)
	}
	got, err := p.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.RequestID != "r1" || got.Gateway != "gw-a" || got.UID != in.UID || !got.HasText || got.Text != "some text" ||
		len(got.Findings) != 1 || got.Findings[0].End != 9 || got.Timings.Tokens != 7 || got.Time.UnixNano() != in.Time.UnixNano() {
		t.Errorf("Get = %+v", got)
	}
	// A write retried after a lost acknowledgement is stored once.
	if id2, err := p.Add(ctx, in); err != nil || id2 != id {
		t.Errorf("re-Add of the same incident = %d, %v; want id %d", id2, err, id)
	}
	for _, tc := range []struct {
		name string
		f    Filter
		want []string
	}{
		{"all", Filter{}, []string{"r2", "r1"}},
		{"halts", Filter{Kind: KindHalt}, []string{"r2"}},
		{"reason", Filter{Reason: validator.ReasonRepetitionLoop}, []string{"r1"}},
		{"other gateway", Filter{Gateway: "gw-b"}, nil},
		{"limit", Filter{Limit: 1}, []string{"r2"}},
		{"since", Filter{Since: time.Now().Add(time.Hour)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := p.List(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, inc := range list {
				ids = append(ids, inc.RequestID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(tc.want) {
				t.Errorf("List(%+v) = %v, want %v", tc.f, ids, tc.want)
			}
		})
	}
	if _, err := p.Get(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(999) = %v, want ErrNotFound", err)
	}
}

func TestPostgresConcurrentGateways(t *testing.T) {
	pg := testbed.StartPostgres(t)
	ctx := context.Background()
	const gateways, each = 4, 50
	var wg sync.WaitGroup
	for g := range gateways {
		p := openPG(t, pg.URL, Options{Gateway: fmt.Sprintf("gw-%d", g)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := p.Add(ctx, pgIncident(fmt.Sprintf("g%d-%d", g, i), validator.ReasonStall)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	p := openPG(t, pg.URL, Options{})
	if n, err := p.Count(ctx); err != nil || n != gateways*each {
		t.Fatalf("count = %d, %v; want %d", n, err, gateways*each)
	}
	list, err := p.List(ctx, Filter{Gateway: "gw-2", Limit: 1000})
	if err != nil || len(list) != each {
		t.Fatalf("gw-2 has %d incidents (%v), want %d", len(list), err, each)
	}
}

func TestPostgresRetention(t *testing.T) {
	pg := testbed.StartPostgres(t)
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	p := openPG(t, pg.URL, Options{MaxRows: 3, MaxAge: time.Hour, Clock: clock.NewFake(now)})
	for i := range 5 {
		inc := pgIncident(fmt.Sprintf("r%d", i), validator.ReasonStall)
		inc.Time = now.Add(-time.Duration(4-i) * 40 * time.Minute) // r0 and r1 are older than an hour
		if _, err := p.Add(ctx, inc); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Add(ctx, pgIncident("r5", validator.ReasonStall)); err != nil {
		t.Fatal(err)
	}
	n, err := p.Prune(ctx)
	if err != nil || n != 3 {
		t.Fatalf("Prune = %d, %v; want 3 (2 by age, 1 by rows)", n, err)
	}
	list, _ := p.List(ctx, Filter{})
	if len(list) != 3 || list[0].RequestID != "r5" || list[2].RequestID != "r3" {
		t.Errorf("kept %+v", list)
	}
}

// TestPostgresRestartLosesNothing restarts PostgreSQL while incidents keep
// coming: those written while it is down wait in memory and are stored
// once, in order, when it is back.
func TestPostgresRestartLosesNothing(t *testing.T) {
	pg := testbed.StartPostgres(t)
	ctx := context.Background()
	p := openPG(t, pg.URL, Options{Gateway: "gw"})
	const total = 300
	for i := range total {
		switch i {
		case 100:
			pg.Stop()
		case 200:
			if p.Buffered() == 0 {
				t.Fatal("nothing buffered while PostgreSQL was down")
			}
			if err := pg.Start(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.Add(ctx, pgIncident(fmt.Sprintf("r%03d", i), validator.ReasonStall)); err != nil {
			t.Fatalf("Add r%03d: %v", i, err)
		}
	}
	flushUntil(t, p)
	if n, err := p.Count(ctx); err != nil || n != total {
		t.Fatalf("count = %d, %v; want %d", n, err, total)
	}
	list, err := p.List(ctx, Filter{Limit: total})
	if err != nil {
		t.Fatal(err)
	}
	for i, inc := range list { // newest first, so ids follow the order of Add
		if want := fmt.Sprintf("r%03d", total-1-i); inc.RequestID != want {
			t.Fatalf("position %d holds %s, want %s", i, inc.RequestID, want)
		}
	}
	if p.Overflowed() != 0 {
		t.Errorf("overflowed %d", p.Overflowed())
	}
}

func TestPostgresOverflowIsCounted(t *testing.T) {
	pg := testbed.StartPostgres(t)
	ctx := context.Background()
	p := openPG(t, pg.URL, Options{Buffer: 5})
	pg.Stop()
	var lost int
	for i := range 8 {
		if _, err := p.Add(ctx, pgIncident(fmt.Sprintf("r%d", i), validator.ReasonStall)); errors.Is(err, ErrOverflow) {
			lost++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if lost != 3 || p.Overflowed() != 3 || p.Buffered() != 5 {
		t.Fatalf("lost %d, Overflowed %d, Buffered %d; want 3, 3, 5", lost, p.Overflowed(), p.Buffered())
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	flushUntil(t, p)
	if n, _ := p.Count(ctx); n != 5 {
		t.Fatalf("count = %d, want the 5 buffered", n)
	}
}
