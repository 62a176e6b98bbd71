package cli

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testlog"

	"github.com/nats-io/nats.go"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/fleet"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/guardnats"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestGuardWorkerRunsItsModel runs aegis guard-worker with a GGUF file: it
// starts its own supervised llama-server on the CPU, joins the queue
// group named after the file, announces its device, and answers a guard
// call from a gateway's session with a real verdict.
func TestGuardWorkerRunsItsModel(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	nt := testbed.StartNATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var errb testlog.Buffer
	go func() {
		done <- Run(ctx, []string{"guard-worker", "--nats", nt.URL, "--model", env.Model, "--device", "CPU",
			"--llama-server", env.LlamaServer, "--id", "w-cpu"}, &IO{In: strings.NewReader(""), Out: io.Discard, Err: &errb})
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("guard-worker exited %d:\n%s", code, errb.String())
		}
	}()
	nc, err := nats.Connect(nt.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var m fleet.Member
	for m.ID == "" { // serving once it answers the roll call
		ms, err := fleet.RollCall(context.Background(), nc, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) > 0 {
			m = ms[0]
		}
		select {
		case code := <-done:
			t.Fatalf("guard-worker exited %d:\n%s", code, errb.String())
		default:
		}
	}
	model := strings.TrimSuffix(env.Model[strings.LastIndex(env.Model, "/")+1:], ".gguf")
	if m.ID != "w-cpu" || m.Role != fleet.RoleGuardWorker || m.Device != "CPU" || m.Model != model {
		t.Fatalf("announced %+v\n%s", m, errb.String())
	}
	s := guardnats.NewSession(nc, model, nil)
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	res, err := s.Judge(cctx, llm.Judgement{Protocol: "verdict-json", Task: "safety", Text: "The cat sat on the mat."})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict == nil || (res.Verdict.Verdict != validator.Pass && res.Verdict.Verdict != validator.Fail) || !res.HasProbs {
		t.Fatalf("result %+v", res)
	}
	if s.Worker() != "w-cpu" {
		t.Errorf("answered by %q", s.Worker())
	}
}

// TestGuardWorkersFallBackToLocalGuard: serve --guard-workers with
// --guard-model asks its own supervised guard server while NATS is
// unreachable, so a fail-closed gateway still gets verdicts.
func TestGuardWorkersFallBackToLocalGuard(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	nt := testbed.StartNATS(t)
	nt.Stop() // NATS down from the start: the gateway's connection keeps retrying
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	closed := false
	gc := guardServerConfig{Model: env.Model, Device: "CPU", LlamaServer: env.LlamaServer, FailOpen: &closed}
	sup, err := startGuardServer(ctx, gc, &events.Bus{}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Stop(context.Background()) })
	guardnats.Register(log)
	extra := workerExtra(sup, gc, fleetConfig{NATS: nt.URL, GuardWorkers: "stories260K"}, log)
	vs := extra(&validator.Request{Messages: []validator.Message{{Role: "user", Content: "Tell me about the sun."}}})
	if len(vs) != 1 {
		t.Fatalf("extra checks %v, want one guard_llm", vs)
	}
	g := vs[0].(*llm.Guard)
	text := "The sun is the star at the centre of the solar system."
	g.Write([]byte(text))
	g.Close()
	g.Wait()
	if !g.Done() {
		t.Fatal("no final verdict after the call returned")
	}
	for _, f := range g.Findings() {
		if f.Reason == validator.ReasonGuardUnavailable {
			t.Fatalf("the local guard server did not stand in for the workers: %+v", f)
		}
	}
}
