package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// verdictBody is a short guard request: a verdict constrained by a JSON
// schema, as the guard client sends it.
var verdictBody = []byte(`{"prompt":"Is this reply safe? Reply: Once upon a time there was a cat.\nVerdict:","n_predict":64,"temperature":0,
"json_schema":{"type":"object","properties":{"verdict":{"enum":["pass","fail"]}},"required":["verdict"]}}`)

func realConfig(t *testing.T, env *testbed.Env, chain ...devices.Device) Config {
	t.Helper()
	if env.LlamaServer == "" || env.Model == "" {
		t.Skip("testbed has no llama-server binary or model")
	}
	return Config{
		Binary: env.LlamaServer, Model: env.Model, Chain: chain, CtxSize: 512, Threads: 1,
		HealthInterval: 100 * time.Millisecond, BackoffBase: 100 * time.Millisecond, StopGrace: 3 * time.Second,
	}
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

func verdict(ctx context.Context, c *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://guard/completion", bytes.NewReader(verdictBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var out struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	var v struct {
		Verdict string `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out.Content), &v); err != nil || (v.Verdict != "pass" && v.Verdict != "fail") {
		return fmt.Errorf("not a verdict: %q", out.Content)
	}
	return nil
}

// TestRealServersCPUAndVulkan starts the testbed's llama-server on the CPU
// and on Vulkan0 (llvmpipe), kills each with SIGKILL, and checks the
// restart, then that Stop leaves no process behind.
func TestRealServersCPUAndVulkan(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	for _, dev := range []devices.Device{{Name: "none"}, {Name: "Vulkan0", Env: []string{"GGML_VK_VISIBLE_DEVICES=0"}}} {
		t.Run(dev.Label(), func(t *testing.T) {
			bus := &events.Bus{}
			sub := bus.Subscribe(64)
			defer sub.Close()
			cfg := realConfig(t, env, dev)
			cfg.Bus = bus
			s := New(cfg)
			// No wall-clock limit: on a loaded machine Vulkan0 (llvmpipe)
			// can take long to start; go test's -timeout bounds a hang.
			ctx := t.Context()
			t.Cleanup(func() { _ = s.Stop(context.Background()) })
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if s.State() != StateReady || s.Device().Name != dev.Name {
				t.Fatalf("state %s on %q", s.State(), s.Device().Name)
			}
			client := s.HTTPClient(0)
			if err := verdict(ctx, client); err != nil {
				t.Fatal(err)
			}
			st, _ := s.Status()
			pid := st.PIDs[0]
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			// The verdict after the kill is answered by the restarted
			// server (or the CPU fallback): no error reaches the caller.
			killed := time.Now()
			if err := verdict(ctx, client); err != nil {
				t.Fatalf("verdict after kill -9: %v", err)
			}
			t.Logf("%s: verdict %v after kill -9 (state %s on %s)", dev.Label(), time.Since(killed).Round(time.Millisecond), s.State(), s.Device().Label())
			st, _ = s.Status()
			var pids []int
			for _, p := range st.PIDs {
				if p != 0 {
					pids = append(pids, p)
				}
			}
			if len(pids) == 0 || pids[0] == pid {
				t.Errorf("no new server process after the kill: %v", st.PIDs)
			}
			if err := s.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			for _, p := range append(pids, pid) {
				if alive(p) {
					t.Errorf("pid %d still alive after Stop", p)
				}
			}
			// The incident log subscribes to these: the crash must be
			// there with its device and cause.
			var restarted bool
			for len(sub.C) > 0 {
				e := <-sub.C
				// Child events name their device; the supervisor's own
				// state events name the serving device, none while
				// restarting.
				if e.GuardState == ChildRestarting.String() && e.GuardDevice != "" {
					restarted = true
					if e.GuardDevice != dev.Label() || !strings.Contains(e.Error, "server exited") {
						t.Errorf("restart event %+v lacks device or cause", e)
					}
				}
			}
			if !restarted {
				t.Error("no restarting event on the bus")
			}
		})
	}
}

// TestRealKillMidRunNoLostRequest is the failure-path acceptance: a
// stream of guard verdicts runs against Vulkan0 with a hot CPU standby;
// the Vulkan0 server is killed mid-run. Every request must succeed and a
// verdict must complete after the kill (how soon is logged).
func TestRealKillMidRunNoLostRequest(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	cfg := realConfig(t, env, devices.Device{Name: "Vulkan0", Env: []string{"GGML_VK_VISIBLE_DEVICES=0"}}, devices.Device{Name: "none"})
	cfg.HotStandby = true
	s := New(cfg)
	ctx := t.Context() // no wall-clock limit; go test's -timeout bounds a hang
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitReal(t, ctx, s, func(st Status) bool { return st.State == StateReady && st.Children[1] == ChildReady })
	client := s.HTTPClient(0)

	var (
		mu       sync.Mutex
		failures []error
		lat      []time.Duration
		starts   []time.Time
	)
	done, first := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 30; i++ {
			t0 := time.Now()
			err := verdict(ctx, client)
			mu.Lock()
			starts, lat = append(starts, t0), append(lat, time.Since(t0))
			if err != nil {
				failures = append(failures, err)
			}
			mu.Unlock()
			if i == 0 {
				close(first)
			}
		}
	}()
	<-first // kill mid-run: after a verdict from the Vulkan0 server
	st, _ := s.Status()
	killedAt := time.Now()
	if err := syscall.Kill(st.PIDs[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("%d of %d requests lost: %v", len(failures), len(lat), failures[0])
	}
	// The request in flight at the kill, or the first one sent after it.
	var recover time.Duration = -1
	for i := range starts {
		end := starts[i].Add(lat[i])
		if end.After(killedAt) {
			recover = end.Sub(killedAt)
			break
		}
	}
	// How soon the next verdict came is a measurement (aegis bench
	// sentinel reports it); on a loaded machine it says nothing about
	// correctness, so it is logged, not asserted.
	t.Logf("kill -9 of the Vulkan0 server: next verdict %v later; %d requests, none lost", recover.Round(time.Millisecond), len(lat))
	if recover < 0 {
		t.Errorf("no verdict completed after the kill")
	}
	pids := st.PIDs
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st2, _ := s.Status()
	for _, p := range append(pids, st2.PIDs...) {
		if alive(p) {
			t.Errorf("pid %d alive after Stop", p)
		}
	}
}

func waitReal(t *testing.T, ctx context.Context, s *Supervisor, cond func(Status) bool) {
	t.Helper()
	for {
		st, ch := s.Status()
		if cond(st) {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting: %v (status %+v)", ctx.Err(), st)
		}
	}
}
