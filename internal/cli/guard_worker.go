package cli

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/fleet"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/guardnats"
	"github.com/aegis-sentinel/aegis/internal/llamaserver"
	"github.com/aegis-sentinel/aegis/internal/logging"
	"github.com/aegis-sentinel/aegis/internal/supervisor"
)

func init() {
	register(func(stdio *IO) *cobra.Command {
		var (
			natsURL, id, name, guardURL, kind, ollamaModel string
			concurrency                                    int
			logVerdicts                                    bool
			gs                                             guardServerConfig
		)
		c := &cobra.Command{
			Use:   "guard-worker",
			Short: "Serve guard verdicts to gateways over NATS",
			Long: `guard-worker answers the guard calls of any number of gateways through a NATS server.
It joins the queue group of its model (subject aegis.guard.<model>), so gateways share
all workers of a model, and a gateway keeps the calls of one response on the same worker
while it lives.

With --model, the worker runs the guard model on its own supervised llama-server, on the
device that measures best (--device auto) with a CPU fallback, as aegis serve --guard-model
does. With --guard-url, it fronts a guard server that already runs.

Gateways use it with guard_llm: {nats: URL, model: NAME} in their policy, or with
aegis serve --nats URL --guard-workers NAME. aegis fleet lists the workers with their
device and measured time to verdict.`,
			Example: `  aegis guard-worker --nats nats://10.0.0.5:4222 --model llama-guard-3-1b.Q4_K_M.gguf --device auto
  aegis guard-worker --nats nats://127.0.0.1:4222 --guard-url http://127.0.0.1:8081 --model-name stories`,
			Args: noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if natsURL == "" {
					return usagef("guard-worker needs --nats URL")
				}
				if (gs.Model == "") == (guardURL == "") {
					return usagef("give exactly one of --model (run a guard server) or --guard-url (use one)")
				}
				if name == "" {
					if gs.Model == "" {
						return usagef("--guard-url needs --model-name: the name gateways ask for")
					}
					name = strings.TrimSuffix(filepath.Base(gs.Model), filepath.Ext(gs.Model))
				}
				k, err := llm.ParseKind(kind)
				if err != nil {
					return usageErr(err)
				}
				if id == "" {
					id = fmt.Sprintf("%s-%d", fleet.Hostname(), os.Getpid())
				}
				return runGuardWorker(cmd.Context(), stdio, natsURL, id, name, concurrency, logVerdicts, gs, guardURL, k, ollamaModel)
			},
		}
		f := c.Flags()
		f.StringVar(&natsURL, "nats", "", "NATS server URL, such as nats://127.0.0.1:4222")
		f.StringVar(&gs.Model, "model", "", "GGUF guard model to run on a supervised llama-server")
		f.StringVar(&gs.Device, "device", "", "device for the guard model: auto (measure, cached), CPU, or a llama.cpp device name such as Vulkan0 (default auto); with --guard-url, the device that server runs on, as announced")
		f.StringVar(&gs.LlamaServer, "llama-server", "", "llama-server binary (default: llama-server on PATH)")
		f.StringArrayVar(&gs.Env, "env", nil, "K=V environment for the guard server, repeatable")
		f.StringVar(&guardURL, "guard-url", "", "use this running guard server instead of starting one")
		f.StringVar(&kind, "kind", "llama-server", "kind of the --guard-url server: llama-server (or llama) or ollama")
		f.StringVar(&ollamaModel, "ollama-model", "", "model name on the --guard-url Ollama")
		f.StringVar(&name, "model-name", "", "model name gateways ask for (default: the --model file name without .gguf)")
		f.StringVar(&id, "id", "", "this worker's name in the fleet (default host-pid)")
		f.IntVar(&concurrency, "concurrency", 4, "guard calls run at once (the server's parallel slots)")
		f.BoolVar(&logVerdicts, "log-verdicts", false, "log every verdict sent, with the gateway's request id and attempt (never the text)")
		return c
	})
}

// serverJudge asks whatever server the supervisor serves from now (it
// changes on fallback).
type serverJudge struct {
	url   func() string
	kind  llm.Kind
	model string
}

func (s serverJudge) Judge(ctx context.Context, j llm.Judgement) (*llm.Result, error) {
	u := s.url()
	if u == "" {
		return nil, fmt.Errorf("guard server not serving")
	}
	c := &llm.Client{BaseURL: u, Kind: s.kind, Model: s.model, Slot: -1, HTTP: llamaserver.Shared}
	return c.Judge(ctx, j)
}

func runGuardWorker(ctx context.Context, stdio *IO, natsURL, id, name string, concurrency int, logVerdicts bool,
	gs guardServerConfig, guardURL string, kind llm.Kind, ollamaModel string) error {
	log := logging.New(stdio.Err, logging.Options{})
	// The worker's spans join the traces of the gateways' requests.
	_, stopTracing, err := startTracing(ctx, "aegis-guard-worker", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	judge := serverJudge{url: func() string { return guardURL }, kind: kind, model: ollamaModel}
	device := func() string { return cmp.Or(gs.Device, "external") } // a running server: what --device says it is
	if gs.Model != "" {
		sup, err := startGuardServer(ctx, gs, nil, log)
		if err != nil {
			return err
		}
		defer sup.Stop(context.Background())
		judge = serverJudge{url: sup.URL, kind: llm.KindLlama}
		device = func() string { return supDevice(sup) }
	}
	nc, err := fleet.Connect(natsURL, "aegis guard-worker "+id, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	w := &guardnats.Worker{NC: nc, ID: id, Model: name, Device: device, Judge: judge, Concurrency: concurrency, Log: log,
		LogVerdicts: logVerdicts}
	return w.Run(ctx)
}

// supDevice names the serving device for the fleet: CPU (llama.cpp's
// "-dev none"), a llama.cpp device name, or "stopped" when none serves.
func supDevice(sup *supervisor.Supervisor) string {
	if sup.URL() == "" {
		return "stopped"
	}
	if d := sup.Device(); !d.IsCPU() {
		return d.Name
	}
	return "CPU"
}
