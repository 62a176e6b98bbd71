package cli

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestServeGuardAutoPlacesAndJudges runs serve's guard path on the real
// testbed: --guard-device auto measures CPU against Vulkan0 (llvmpipe)
// and must pick the CPU; the guard_llm check built per request gets a
// verdict from the supervised server (fail closed, so a missing answer
// would show as guard_unavailable); once the server is gone, requests get
// a check that reports their text unjudged (guard_unavailable), for the
// policy's rule to release with a note or halt.
func TestServeGuardAutoPlacesAndJudges(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	testbed.Measuring(t)                    // its verdict depends on measured speed
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // measure, do not reuse a placement cached elsewhere
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	closed := false
	// A deadline far past any verdict's time, also on a loaded machine:
	// the guard must answer, how fast is the benchmarks' business.
	gc := guardServerConfig{Model: env.Model, Device: "auto", LlamaServer: env.LlamaServer,
		Env: []string{"GGML_VK_VISIBLE_DEVICES=0"}, FailOpen: &closed, Deadline: time.Minute}
	sup, err := startGuardServer(ctx, gc, &events.Bus{}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Stop(context.Background()) })
	// Which device wins is a measurement (llvmpipe is usually far slower
	// than the CPU, but a loaded machine can say otherwise); the choice
	// rules are table-tested on fixed numbers in internal/bench. Here the
	// placement must have chosen a device and the guard must judge on it.
	d := sup.Device()
	if d.Name == "" {
		t.Fatal("auto placement chose no device")
	}
	t.Logf("auto placement chose %s", d.Name)

	extra := guardExtra(sup, gc, log)
	req := &validator.Request{Messages: []validator.Message{{Role: "user", Content: "Tell me about the sun."}}}
	vs := extra(req)
	if len(vs) != 1 || vs[0].Name() != "guard_llm" {
		t.Fatalf("extra checks %v, want one guard_llm", vs)
	}
	g := vs[0].(*llm.Guard)
	text := "The sun is the star at the centre of the solar system. It gives light and heat."
	g.Write([]byte(text))
	g.Close()
	waitGuard(g)
	for _, f := range g.Findings() {
		if f.Reason == validator.ReasonGuardUnavailable {
			t.Fatalf("the supervised guard server did not answer: %+v", f)
		}
	}
	if len(g.Findings()) == 0 && g.Settled() != len(text) {
		t.Fatalf("passing guard settled %d of %d bytes", g.Settled(), len(text))
	}

	if err := sup.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	vs = extra(req)
	if len(vs) != 1 {
		t.Fatalf("with the guard server stopped, got %d extra checks; want the one that says unjudged", len(vs))
	}
	vs[0].Write([]byte(text))
	if fs := vs[0].Findings(); len(fs) != 1 || fs[0].Reason != validator.ReasonGuardUnavailable {
		t.Fatalf("with the guard server stopped, findings %+v; want guard_unavailable", fs)
	}
}

// waitGuard waits until g's final verdict is in: woken by g when a call
// ends, and at its next deadline to let g give the call up. No wall-clock
// limit of its own: the guard's deadline ends a call that never answers.
func waitGuard(g *llm.Guard) {
	woke := make(chan struct{}, 1)
	g.Notify(func() {
		select {
		case woke <- struct{}{}:
		default:
		}
	})
	defer g.Notify(nil)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for g.Tick(time.Now()); !g.Done(); g.Tick(time.Now()) {
		t.Stop()
		if d := g.NextDeadline(); !d.IsZero() {
			t.Reset(time.Until(d))
		}
		select {
		case <-woke:
		case <-t.C:
		}
	}
	g.Wait()
}
