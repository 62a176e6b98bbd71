package cli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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
	var errb syncBuf
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
