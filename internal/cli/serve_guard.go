package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/bench"
	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/supervisor"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// guardServerConfig is serve's optional guard model on its own
// llama-server, supervised, on the device that measures best:
//
//	guard_server:
//	  model: /models/llama-guard-3-1b.Q4_K_M.gguf
//	  device: auto          # auto | CPU | a llama.cpp device name (Vulkan0, CUDA1, SYCL0)
//	  llama_server: llama-server
//	  env: [GGML_VK_VISIBLE_DEVICES=0]
//	  task: safety          # safety | injection | drift | tool_call
//	  fail_open: true       # shorthand for the policy's rule for guard_unavailable
type guardServerConfig struct {
	Model       string   `yaml:"model"`
	Device      string   `yaml:"device"`
	LlamaServer string   `yaml:"llama_server"`
	Env         []string `yaml:"env"`
	Task        string   `yaml:"task"`
	// FailOpen is a shorthand for the policy's rule for guard_unavailable
	// (true: release, false: halt), which alone decides what happens to
	// text the guard could not judge (see policy/unjudged.go).
	FailOpen *bool `yaml:"fail_open"`
	// Deadline bounds every guard call (guard_llm's deadline).
	Deadline time.Duration `yaml:"deadline"`
	// Threads is the guard server's -t; 0 means the physical cores less
	// the ones the main server's host threads need (devices.GuardThreads).
	Threads int `yaml:"threads"`
}

// guardFlags adds serve's guard-server flags; they override the config.
func guardFlags(c *cobra.Command, g *guardServerConfig) {
	f := c.Flags()
	f.StringVar(&g.Model, "guard-model", "", "GGUF guard model to run on its own supervised llama-server and ask about every output")
	f.StringVar(&g.Device, "guard-device", "", "device for the guard model: auto (measure, cached), CPU, or a llama.cpp device name such as Vulkan0 (default auto)")
	f.StringVar(&g.LlamaServer, "guard-llama-server", "", "llama-server binary for the guard (default: llama-server on PATH)")
	f.StringArrayVar(&g.Env, "guard-env", nil, "K=V environment for the guard server, repeatable (e.g. GGML_VK_VISIBLE_DEVICES=0)")
	f.DurationVar(&g.Deadline, "guard-deadline", 0, "how long one guard verdict may take, on the guard server or the guard workers (default 2s)")
	f.IntVar(&g.Threads, "guard-threads", 0, "threads of the guard server (default: the physical cores less two, left to the main server's own threads)")
}

// merge lays the flags that were set over the config file's section.
func (g guardServerConfig) merge(flags guardServerConfig) guardServerConfig {
	if flags.Model != "" {
		g.Model = flags.Model
	}
	if flags.Device != "" {
		g.Device = flags.Device
	}
	if flags.LlamaServer != "" {
		g.LlamaServer = flags.LlamaServer
	}
	if len(flags.Env) > 0 {
		g.Env = flags.Env
	}
	if flags.Deadline > 0 {
		g.Deadline = flags.Deadline
	}
	if flags.Threads > 0 {
		g.Threads = flags.Threads
	}
	return g
}

// startGuardServer picks the guard's device (measured by bench.AutoPlace
// for "auto", cached per model, devices and server version), starts the
// guard server there under the supervisor with a CPU fallback, and waits
// until it serves. The supervisor publishes its state on bus.
func startGuardServer(ctx context.Context, gc guardServerConfig, bus *events.Bus, log *slog.Logger) (*supervisor.Supervisor, error) {
	bin := gc.LlamaServer
	if bin == "" {
		bin = "llama-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("guard server: %w (set --guard-llama-server)", err)
	}
	var dev devices.Device
	switch d := gc.Device; {
	case d == "" || strings.EqualFold(d, "auto"):
		cands, err := bench.Candidates(ctx, path, gc.Env)
		if err != nil {
			return nil, fmt.Errorf("guard server: listing devices: %w", err)
		}
		p, err := bench.AutoPlace(ctx, bench.AutoOptions{Binary: path, Model: gc.Model, Devices: cands})
		if err != nil {
			return nil, fmt.Errorf("guard server: placing the guard: %w", err)
		}
		dev = p.Chosen()
		log.Info(fmt.Sprintf("guard device: %s (%s; ratio %.2fx vs CPU%s)", p.Device, p.Reason, p.Ratio, map[bool]string{true: ", cached", false: ""}[p.Cached]))
	default:
		devs, err := bench.ResolveDevices(ctx, path, []string{d}, gc.Env)
		if err != nil {
			return nil, fmt.Errorf("guard server: device %q: %w", d, err)
		}
		dev = devs[0]
	}
	threads := gc.Threads
	if threads <= 0 {
		threads = devices.GuardThreads(bench.PhysicalCores())
	}
	sup := supervisor.New(supervisor.Config{
		Binary: path, Model: gc.Model, Chain: []devices.Device{dev}, Threads: threads,
		HotStandby: !dev.IsCPU(), // a warm CPU spare: the next verdict comes from it if the device fails
		Bus:        bus,
	})
	if err := sup.Start(ctx); err != nil {
		return nil, fmt.Errorf("guard server: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	url, err := sup.WaitServing(wctx)
	if err != nil {
		sup.Stop(context.Background())
		return nil, fmt.Errorf("guard server: not serving: %w", err)
	}
	log.Info("guard server ready", "url", url, "device", sup.Device().Name)
	return sup, nil
}

// guardCheck makes the policy check through which a guard started at run
// time (the supervised guard server, the fleet's guard workers) enters
// every attempt: f builds it for a request, or nothing when no guard
// serves.
func guardCheck(f func(*validator.Request) []validator.Validator) policy.Check {
	return policy.Check{Name: "guard_server", Spec: validator.Spec{Name: "guard_server",
		New: func(_ any, req *validator.Request) (validator.Validator, error) {
			if vs := f(req); len(vs) > 0 {
				return vs[0], nil
			}
			return nil, nil
		}}}
}

// guardExtra returns the constructor of guardCheck: a guard_llm check against
// whatever server the supervisor serves from now (it changes on
// fallback). With no server serving, the check reports the output with a
// guard_unavailable finding, and the policy's rule for guard_unavailable
// decides (the request's Unjudged): the text goes out with the finding as
// a note, or the response halts.
func guardExtra(sup *supervisor.Supervisor, gc guardServerConfig, log *slog.Logger) func(*validator.Request) []validator.Validator {
	return func(req *validator.Request) []validator.Validator {
		url := sup.URL()
		if url == "" {
			return []validator.Validator{validator.Unavailable("guard_llm", "the guard server is not serving", req)}
		}
		return []validator.Validator{guardLLM(llm.Config{URL: url, Kind: "llama-server", Task: gc.Task, Deadline: gc.Deadline,
			Device: sup.Device().Label()}, req, log)} // its calls count under the device its status shows
	}
}

// guardLLM builds a guard_llm check for req, or, when it cannot be built,
// the check that reports the output unjudged.
func guardLLM(c llm.Config, req *validator.Request, log *slog.Logger) validator.Validator {
	v, err := llm.New(c, req, nil)
	if err != nil {
		log.Warn("guard check not built", "err", err)
		return validator.Unavailable("guard_llm", "the guard check could not be built: "+err.Error(), req)
	}
	return v
}
