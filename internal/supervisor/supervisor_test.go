package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/events"
	"go.uber.org/goleak"
)

func ok(string, int) behaviour { return behaviour{} }

// waitFor polls cond until it holds. It sets no wall-clock limit (a
// loaded machine only makes the wait longer); go test's -timeout ends a
// wait that never ends, with every goroutine's stack.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatalf("test ended waiting for %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}

// noLeaks returns a check that no goroutine started since outlives the
// supervisor's Stop.
func noLeaks(t *testing.T) func() {
	opt := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		goleak.VerifyNone(t, opt) // it retries while goroutines wind down
	}
}

func stop(t *testing.T, s *Supervisor, w *fakeWorld) {
	t.Helper()
	// A bound on a Stop that hangs, far past what a loaded machine takes.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s.State() != StateStopped {
		t.Errorf("state after Stop = %s", s.State())
	}
	if live := w.live(); len(live) > 0 {
		t.Errorf("processes left after Stop: %v", live)
	}
}

func TestStartReadyPinsDevice(t *testing.T) {
	defer noLeaks(t)()
	w := newFakeWorld(ok)
	cfg, _ := w.config(devices.Device{Name: "Vulkan0", Env: []string{"GGML_VK_VISIBLE_DEVICES=0"}})
	bus := &events.Bus{}
	sub := bus.Subscribe(64)
	defer sub.Close()
	cfg.Bus = bus
	s := New(cfg)
	if got := s.Chain(); len(got) != 2 || !got[1].IsCPU() {
		t.Fatalf("chain %+v: want CPU appended", got)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.State() != StateReady || s.Device().Name != "Vulkan0" || !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("state %s device %q url %q", s.State(), s.Device().Name, s.URL())
	}
	p := w.current("Vulkan0")
	if a := joinArgs(p.args); !strings.Contains(a, "-dev Vulkan0 -ngl 99") || !strings.Contains(a, "--host 127.0.0.1") {
		t.Errorf("args %q", a)
	}
	if !slices.Contains(p.env, "GGML_VK_VISIBLE_DEVICES=0") {
		t.Errorf("env %v", p.env)
	}
	if w.count("none") != 0 {
		t.Error("CPU started without need")
	}
	stop(t, s, w)
	var states []string
	for len(sub.C) > 0 {
		e := <-sub.C
		if e.Kind != events.GuardStatus {
			t.Errorf("event kind %s", e.Kind)
		}
		states = append(states, e.GuardDevice+":"+e.GuardState)
	}
	for _, want := range []string{"Vulkan0:ready", ":stopped"} {
		if !slices.Contains(states, want) {
			t.Errorf("events %v lack %s", states, want)
		}
	}
}

func TestFailurePaths(t *testing.T) {
	cases := []struct {
		name       string
		script     func(dev string, n int) behaviour
		maxRestart int
		wantState  State
		wantDevice string
		wantErr    error
		wantStarts int // starts of Vulkan0
		wantBack   []time.Duration
		wantChild0 ChildState
	}{
		{
			name: "crash twice then recover on the same device",
			script: func(dev string, n int) behaviour {
				if dev == "Vulkan0" && n < 3 {
					return behaviour{exitAfter: 2}
				}
				return behaviour{}
			},
			wantState: StateReady, wantDevice: "Vulkan0", wantErr: ErrExited, wantStarts: 3,
			wantBack: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, wantChild0: ChildReady,
		},
		{
			name: "crash loop falls back to the CPU",
			script: func(dev string, n int) behaviour {
				if dev == "Vulkan0" {
					return behaviour{exitAfter: 1}
				}
				return behaviour{}
			},
			wantState: StateFallback, wantDevice: "none", wantErr: ErrExited, wantStarts: 3,
			wantBack: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, wantChild0: ChildFailed,
		},
		{
			name: "out of memory falls back without restarting",
			script: func(dev string, n int) behaviour {
				if dev == "Vulkan0" {
					return behaviour{output: []string{"ggml_vulkan: Device memory allocation of size 1234 failed.", "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory"}, exitAtOnce: true}
				}
				return behaviour{}
			},
			wantState: StateFallback, wantDevice: "none", wantErr: ErrOutOfMemory, wantStarts: 1, wantChild0: ChildFailed,
		},
		{
			name: "model load error falls back without restarting",
			script: func(dev string, n int) behaviour {
				if dev == "Vulkan0" {
					return behaviour{output: []string{"llama_model_load: error loading model: bad magic"}, exitAtOnce: true}
				}
				return behaviour{}
			},
			wantState: StateFallback, wantDevice: "none", wantErr: ErrLoadFailed, wantStarts: 1, wantChild0: ChildFailed,
		},
		{
			name: "hang is detected by health probes",
			script: func(dev string, n int) behaviour {
				if dev == "Vulkan0" {
					return behaviour{hangAfter: 2}
				}
				return behaviour{}
			},
			maxRestart: -1, wantState: StateFallback, wantDevice: "none", wantErr: ErrHung, wantStarts: 1, wantChild0: ChildFailed,
		},
		{
			name: "never ready hits the start timeout",
			script: func(dev string, n int) behaviour {
				if dev == "Vulkan0" {
					return behaviour{never: true}
				}
				return behaviour{loadProbes: 3}
			},
			maxRestart: -1, wantState: StateFallback, wantDevice: "none", wantErr: ErrStartTimeout, wantStarts: 1, wantChild0: ChildFailed,
		},
		{
			name: "nothing starts: deterministic only",
			script: func(dev string, n int) behaviour {
				return behaviour{startErr: true}
			},
			maxRestart: -1, wantState: StateDeterministic, wantStarts: 1, wantChild0: ChildFailed,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer noLeaks(t)()
			w := newFakeWorld(tc.script)
			cfg, clk := w.config(devices.Device{Name: "Vulkan0"})
			if tc.maxRestart != 0 {
				cfg.MaxRestarts = tc.maxRestart
			}
			s := New(cfg)
			err := s.Start(context.Background())
			if tc.wantState == StateDeterministic {
				if !errors.Is(err, ErrDeterministic) {
					t.Fatalf("Start = %v, want ErrDeterministic", err)
				}
				if _, err := s.WaitServing(context.Background()); !errors.Is(err, ErrDeterministic) {
					t.Errorf("WaitServing = %v", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "state "+tc.wantState.String(), func() bool {
				st, _ := s.Status()
				return st.State == tc.wantState && (st.URL == "" || st.Device.Name == tc.wantDevice) &&
					st.Children[0] == tc.wantChild0 && w.count("Vulkan0") == tc.wantStarts
			})
			st, _ := s.Status()
			if tc.wantErr != nil && !errors.Is(st.Err, tc.wantErr) {
				t.Errorf("last error %v, want %v", st.Err, tc.wantErr)
			}
			if got := w.count("Vulkan0"); got != tc.wantStarts {
				t.Errorf("Vulkan0 started %d times, want %d", got, tc.wantStarts)
			}
			if tc.wantBack != nil && !slices.Equal(clk.backoffs(), tc.wantBack) {
				t.Errorf("backoffs %v, want %v", clk.backoffs(), tc.wantBack)
			}
			stop(t, s, w)
		})
	}
}

// TestHealthBlipIsNotARestart: one failed probe marks the child
// unhealthy; the next good probe makes it ready again without a restart.
func TestHealthBlipIsNotARestart(t *testing.T) {
	defer noLeaks(t)()
	w := newFakeWorld(func(string, int) behaviour {
		return behaviour{blipAt: 3, output: []string{"main: server is listening on http://127.0.0.1"}}
	})
	cfg, _ := w.config(devices.Device{Name: "Vulkan0"})
	var logged []string
	cfg.Log = func(dev, line string) { logged = append(logged, dev+": "+line) }
	s := New(cfg)
	sub := s.Subscribe(64)
	defer sub.Close()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var seq []string
	timeout := t.Context().Done() // no wall-clock limit: go test's -timeout bounds a hang
	for len(seq) < 3 || seq[len(seq)-1] != "ready" {
		select {
		case e := <-sub.C:
			if e.GuardDevice == "Vulkan0" && e.GuardState != "" && (len(seq) == 0 || seq[len(seq)-1] != e.GuardState) {
				if e.GuardState == ChildStarting.String() || e.GuardState == ChildReady.String() || e.GuardState == ChildUnhealthy.String() {
					seq = append(seq, e.GuardState)
				}
			}
		case <-timeout:
			t.Fatalf("states %v", seq)
		}
		if len(seq) > 6 {
			break
		}
	}
	if !slices.Equal(seq[len(seq)-3:], []string{"ready", "unhealthy", "ready"}) {
		t.Errorf("states %v, want ... ready unhealthy ready", seq)
	}
	if w.count("Vulkan0") != 1 {
		t.Errorf("restarted %d times", w.count("Vulkan0")-1)
	}
	stop(t, s, w)
	if len(logged) != 1 || logged[0] != "Vulkan0: main: server is listening on http://127.0.0.1" {
		t.Errorf("Log got %q", logged)
	}
}

func TestMemoryBudgetRefusesDevice(t *testing.T) {
	w := newFakeWorld(ok)
	cfg, _ := w.config(devices.Device{Name: "SYCL0", Free: 512})
	cfg.Estimate = func(string, int) int64 { return 2048 }
	s := New(cfg)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Status()
	if st.State != StateFallback || !st.Device.IsCPU() || !errors.Is(st.Err, ErrOverBudget) {
		t.Errorf("status %+v", st)
	}
	if w.count("SYCL0") != 0 {
		t.Error("over-budget device was started")
	}
	stop(t, s, w)
}

func TestHotStandbySwitchesAtOnce(t *testing.T) {
	defer noLeaks(t)()
	w := newFakeWorld(ok)
	cfg, _ := w.config(devices.Device{Name: "Vulkan0"}, devices.Device{Name: "none"})
	cfg.HotStandby = true
	s := New(cfg)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both up", func() bool { st, _ := s.Status(); return st.Children[1] == ChildReady && st.State == StateReady })
	sub := s.Subscribe(256)
	defer sub.Close()
	w.current("Vulkan0").exit(errors.New("signal: killed"))
	// The fake restarts the primary at once, so the fallback is seen on
	// the bus rather than by polling.
	var sawFallback bool
	timeout := t.Context().Done() // no wall-clock limit: go test's -timeout bounds a hang
	for !sawFallback {
		select {
		case e := <-sub.C:
			sawFallback = e.GuardState == StateFallback.String() && e.GuardDevice == "CPU"
		case <-timeout:
			t.Fatal("no fallback to the standby")
		}
	}
	waitFor(t, "primary back", func() bool { return s.State() == StateReady && s.Device().Name == "Vulkan0" })
	if w.count("none") != 1 {
		t.Errorf("standby started %d times", w.count("none"))
	}
	stop(t, s, w)
}

// TestStandbyServesWhileKilledServerExits: a killed server closes its
// port at once but may take seconds to be reaped. Its requests go to the
// hot standby as soon as a probe finds the port closed, not once the
// process is gone.
func TestStandbyServesWhileKilledServerExits(t *testing.T) {
	defer noLeaks(t)()
	reap := make(chan struct{})
	w := newFakeWorld(func(dev string, n int) behaviour {
		if dev == "Vulkan0" && n == 1 {
			return behaviour{goneAfter: 3, reap: reap}
		}
		return behaviour{}
	})
	cfg, _ := w.config(devices.Device{Name: "Vulkan0"}, devices.Device{Name: "none"})
	cfg.HotStandby = true
	s := New(cfg)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The primary's process cannot be reaped before reap is closed: the
	// standby serves while it exits, or never.
	waitFor(t, "the standby serving while the primary exits", func() bool {
		st, _ := s.Status()
		return st.State == StateFallback && st.Device.Name == "none" && st.Children[0] == ChildUnhealthy
	})
	if len(w.live()) != 2 || w.count("Vulkan0") != 1 {
		t.Errorf("processes while the primary exits: %v", w.live())
	}
	close(reap)
	waitFor(t, "primary back", func() bool { return s.State() == StateReady && s.Device().Name == "Vulkan0" })
	if w.count("Vulkan0") != 2 {
		t.Errorf("primary started %d times, want 2", w.count("Vulkan0"))
	}
	stop(t, s, w)
}

// TestHTTPHealthGone: a port nobody listens on is gone, not down.
func TestHTTPHealthGone(t *testing.T) {
	port, err := PickPort()
	if err != nil {
		t.Fatal(err)
	}
	if h := HTTPHealth(nil)(t.Context(), fmt.Sprintf("http://127.0.0.1:%d", port)); h != HealthGone {
		t.Errorf("health of a closed port = %s, want gone", h)
	}
}

func TestCommandRecipes(t *testing.T) {
	cfg := Config{Binary: "x", Model: "m.gguf", Threads: 2}
	cfg.defaults()
	cases := []struct {
		dev      devices.Device
		args     []string
		env      []string
		backend  string
		notInArg string
	}{
		{devices.Device{Name: "none"}, []string{"-dev none -ngl 0", "-t 2"}, nil, "CPU", "-fa"},
		{devices.Device{Name: "SYCL0"}, []string{"-dev SYCL0 -ngl 99", "-fa off -ctk f16 -ctv f16"}, []string{"SYCL_CACHE_PERSISTENT=0", "GGML_SYCL_DISABLE_DNN=1"}, "SYCL", ""},
		{devices.Device{Name: "Vulkan0", Env: []string{"GGML_VK_VISIBLE_DEVICES=0"}}, []string{"-dev Vulkan0 -ngl 99"}, []string{"GGML_VK_VISIBLE_DEVICES=0"}, "Vulkan", "-fa"},
		{devices.Device{Name: "CUDA1"}, []string{"-dev CUDA1 -ngl 99"}, nil, "CUDA", "-fa"},
	}
	for _, tc := range cases {
		t.Run(tc.dev.Name, func(t *testing.T) {
			args, env := cfg.launch(tc.dev, 1234).Command()
			a := joinArgs(args)
			for _, w := range tc.args {
				if !strings.Contains(a, w) {
					t.Errorf("args %q lack %q", a, w)
				}
			}
			if tc.notInArg != "" && strings.Contains(a, tc.notInArg) {
				t.Errorf("args %q have %q", a, tc.notInArg)
			}
			if !slices.Equal(env, tc.env) {
				t.Errorf("env %v, want %v", env, tc.env)
			}
			if string(devices.BackendOf(tc.dev.Name)) != tc.backend {
				t.Errorf("backend %s", devices.BackendOf(tc.dev.Name))
			}
		})
	}
}

func TestBackoffCapped(t *testing.T) {
	cfg := Config{BackoffBase: time.Second, BackoffMax: 5 * time.Second}
	var got []time.Duration
	for n := 1; n <= 5; n++ {
		got = append(got, cfg.backoff(n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("backoff %v, want %v", got, want)
	}
}

// TestPortTakenIsStartedElsewhere: a port another process took between
// PickPort and the server's bind makes the server exit saying so; the
// child starts again at once on a fresh port, and that is no failure
// (MaxRestarts 0 still ends ready).
func TestPortTakenIsStartedElsewhere(t *testing.T) {
	defer noLeaks(t)()
	w := newFakeWorld(func(_ string, n int) behaviour {
		if n <= 2 {
			return behaviour{exitAtOnce: true, output: []string{"start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 40001"}}
		}
		return behaviour{}
	})
	cfg, clk := w.config(devices.Device{Name: "CPU"})
	cfg.MaxRestarts = 0
	s := New(cfg)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.State() != StateReady || w.count("none") != 3 {
		t.Fatalf("state %s after %d starts; want ready on the third", s.State(), w.count("none"))
	}
	if b := clk.backoffs(); len(b) != 0 {
		t.Errorf("backed off %v before a start on a fresh port", b)
	}
	stop(t, s, w)
}
