// Package supervisor runs guard-model servers (llama-server) as child
// processes pinned to a device, keeps them healthy, and falls back along a
// chain of devices when one fails: chosen device → CPU → deterministic
// checks only. A crash in a guard server degrades Aegis; it never takes it
// down.
//
// Each server is started with the llamaserver launcher (the one command
// line for a model on a device, with the backend's recipe), as a process
// group. Each child has one owner goroutine that holds its process and state
// (llama-swap style); the Supervisor's own goroutine receives their state
// changes over a channel, decides which child serves, and publishes
// snapshots for URL/State/Device and events.GuardStatus on the bus.
//
// Child states and transitions:
//
//	stopped ──Start──▶ starting ──/health 200──▶ ready
//	starting ──exit / start timeout──▶ restarting (or failed)
//	ready ──probe fails──▶ unhealthy ──probe ok──▶ ready
//	unhealthy ──UnhealthyAfter fails (hang)──▶ restarting (or failed)
//	ready ──process exits (crash, kill -9)──▶ restarting (or failed)
//	restarting ──backoff (Base·2^(n-1), ≤ Max)──▶ starting
//	any ──more than MaxRestarts failures, OOM in the log, model load
//	      error, over the memory budget──▶ failed (final)
//	any ──Stop──▶ stopped (SIGTERM to the process group, SIGKILL after
//	      StopGrace)
//
// Supervisor states, derived from the children:
//
//	starting            nothing ready yet, a child is starting
//	ready               the preferred device (Chain[0]) serves
//	fallback            a later device in the chain serves (the preferred
//	                    one is restarting or failed)
//	restarting          nothing serves right now; a child will retry
//	deterministic-only  every device failed: URL() is "" and callers run
//	                    the deterministic checks alone
//	stopped             after Stop
//
// When a link is restarting or has failed, the next link is started, so
// the chain serves from the fallback while the preferred device restarts,
// and switches back once it is ready again. With HotStandby the next link
// runs as a warm spare from the start, so a crash of the preferred server
// switches URL() at once instead of after the fallback's start-up.
//
// Events: every child state change is published as events.GuardStatus
// with GuardDevice = that child's device and Error = the cause of a
// failure; every change of the supervisor's own state or URL is published
// with GuardDevice = the serving device ("" when none serves).
//
// Callers reach the serving server through HTTPClient, which resends a
// request that met a dead server to whatever serves next; when nothing
// can serve it fails with ErrDeterministic and the caller runs the
// deterministic checks alone (reason guard_unavailable).
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/llamaproc"
	"github.com/aegis-sentinel/aegis/internal/llamaserver"
)

// State is the supervisor's overall state.
type State int

// Supervisor states; see the package documentation.
const (
	StateStopped State = iota
	StateStarting
	StateReady
	StateFallback
	StateRestarting
	StateDeterministic
)

func (s State) String() string {
	switch s {
	case StateStopped:
		return "stopped"
	case StateStarting:
		return "starting"
	case StateReady:
		return "ready"
	case StateFallback:
		return "fallback"
	case StateRestarting:
		return "restarting"
	case StateDeterministic:
		return "deterministic-only"
	}
	return "unknown"
}

// Config configures a Supervisor. Zero durations and nil hooks take the
// documented defaults.
type Config struct {
	Name   string // shown in events; default "guard"
	Binary string // llama-server path
	Model  string // GGUF path
	// Chain is the preferred device followed by its fallbacks. A CPU link
	// is appended when the chain has none.
	Chain []devices.Device
	// HotStandby keeps Chain[1] running as a warm spare.
	HotStandby bool
	// NoCPUFallback keeps the chain as given (benchmarks pin one device
	// and must not silently measure the CPU instead).
	NoCPUFallback bool
	CtxSize       int      // -c; default 2048
	Threads       int      // -t; 0 leaves llama-server's default
	Parallel      int      // -np; default 1
	Args          []string // extra arguments for every server

	StartTimeout   time.Duration // to the first /health 200; default 60s
	StartPoll      time.Duration // /health poll while starting; default 50ms
	HealthInterval time.Duration // /health poll while ready; default 500ms
	ProbeTimeout   time.Duration // one probe; default 1s
	UnhealthyAfter int           // failed probes in a row that mean "hung"; default 3
	MaxRestarts    int           // restarts per device before falling back; default 2, <0 means none
	BackoffBase    time.Duration // default 250ms
	BackoffMax     time.Duration // default 10s
	StableAfter    time.Duration // ready this long resets the failure count; default 60s
	StopGrace      time.Duration // SIGTERM → SIGKILL; default 5s

	// Estimate returns the model + KV memory need in MiB; nil uses a rough
	// estimate from the file size and CtxSize.
	Estimate func(model string, ctx int) int64

	Bus      *events.Bus               // GuardStatus events; nil discards
	Log      func(device, line string) // every line of server output; nil drops them
	Clock    clock.Clock               // nil: the real clock
	Starter  llamaproc.Starter         // nil: ExecStarter
	Health   HealthFunc                // nil: HTTPHealth(nil)
	PickPort func() (int, error)       // nil: PickPort
}

func (c *Config) defaults() {
	if c.Name == "" {
		c.Name = "guard"
	}
	hasCPU := false
	for _, d := range c.Chain {
		hasCPU = hasCPU || d.IsCPU()
	}
	if !hasCPU && !c.NoCPUFallback {
		c.Chain = append(c.Chain, devices.Device{Name: "none"})
	}
	setInt := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	setDur := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	setInt(&c.CtxSize, 2048)
	setInt(&c.Parallel, 1)
	setInt(&c.UnhealthyAfter, 3)
	if c.MaxRestarts == 0 {
		c.MaxRestarts = 2
	}
	setDur(&c.StartTimeout, 60*time.Second)
	setDur(&c.StartPoll, 50*time.Millisecond)
	setDur(&c.HealthInterval, 500*time.Millisecond)
	setDur(&c.ProbeTimeout, time.Second)
	setDur(&c.BackoffBase, 250*time.Millisecond)
	setDur(&c.BackoffMax, 10*time.Second)
	setDur(&c.StableAfter, 60*time.Second)
	setDur(&c.StopGrace, 5*time.Second)
	c.Clock = clock.Or(c.Clock)
	if c.Starter == nil {
		c.Starter = llamaproc.ExecStarter
	}
	if c.Health == nil {
		c.Health = HTTPHealth(nil)
	}
	if c.PickPort == nil {
		c.PickPort = PickPort
	}
}

// backoff returns the wait before restart number n (n >= 1).
func (c *Config) backoff(n int) time.Duration {
	d := c.BackoffBase
	for i := 1; i < n && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

// estimate is the memory need in MiB.
func (c *Config) estimate() int64 {
	if c.Estimate != nil {
		return c.Estimate(c.Model, c.CtxSize)
	}
	return RoughEstimateMiB(c.Model, c.CtxSize)
}

// RoughEstimateMiB guesses a model's memory need from its file size:
// weights + 10%, plus 64 KiB of KV and compute per context token, plus
// 64 MiB of fixed buffers. GGUF-based estimates (internal/placement) are
// better; this is what the supervisor uses when none is given.
func RoughEstimateMiB(model string, ctx int) int64 {
	fi, err := os.Stat(model)
	if err != nil {
		return 0
	}
	size := fi.Size() >> 20
	return size + size/10 + int64(ctx)/16 + 64
}

// launch is the server of chain link d on port.
func (c *Config) launch(d devices.Device, port int) llamaproc.Launch {
	return llamaproc.Launch{Binary: c.Binary, Model: c.Model, Port: port, CtxSize: c.CtxSize,
		Parallel: c.Parallel, Threads: c.Threads, Device: d, Args: c.Args}
}

// Status is a published snapshot of the supervisor.
type Status struct {
	State  State
	URL    string         // "" unless a server is ready
	Device devices.Device // the serving device (zero when none)
	Err    error          // the last failure, if any
	// Children holds each chain link's state, in chain order, and PIDs
	// the process id of each running link (0 when none).
	Children []ChildState
	PIDs     []int
}

// Supervisor runs the guard servers of one Config.
type Supervisor struct {
	cfg Config

	mu      sync.Mutex
	status  Status
	changed chan struct{} // closed and replaced on every status change
	started bool

	updates  chan childUpdate
	stopReq  chan chan struct{}
	loopDone chan struct{}
}

// New returns a Supervisor for cfg. Nothing runs until Start.
func New(cfg Config) *Supervisor {
	cfg.defaults()
	if cfg.Bus == nil {
		cfg.Bus = &events.Bus{}
	}
	s := &Supervisor{
		cfg:      cfg,
		changed:  make(chan struct{}),
		updates:  make(chan childUpdate, 16),
		stopReq:  make(chan chan struct{}),
		loopDone: make(chan struct{}),
	}
	s.status.Children = make([]ChildState, len(cfg.Chain))
	return s
}

// Subscribe returns a subscription to this supervisor's GuardStatus
// events (on Config.Bus, or its private bus), buffered for n events.
func (s *Supervisor) Subscribe(n int) *events.Subscription { return s.cfg.Bus.Subscribe(n) }

// Chain returns the fallback chain (with the CPU link appended if needed).
func (s *Supervisor) Chain() []devices.Device { return append([]devices.Device(nil), s.cfg.Chain...) }

// Start launches the preferred device's server (and the standby) and
// waits until one serves, every device failed, or ctx ends. It returns an
// error wrapping ErrDeterministic when no device could start; the
// Supervisor then stays in deterministic-only mode until Stop. When ctx
// ends first the children keep starting in the background: call Stop in
// every case.
func (s *Supervisor) Start(ctx context.Context) error {
	if s.cfg.Binary == "" || s.cfg.Model == "" || len(s.cfg.Chain) == 0 {
		return errors.New("supervisor: Config needs Binary, Model and a device chain")
	}
	for _, d := range s.cfg.Chain {
		if d.Name == "" {
			return errors.New(`supervisor: a chain device has no name (use "none" for the CPU)`)
		}
	}
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("supervisor: already started")
	}
	s.started = true
	s.mu.Unlock()
	go s.loop()
	for {
		st, ch := s.Status()
		switch st.State {
		case StateReady, StateFallback:
			return nil
		case StateDeterministic:
			return fmt.Errorf("supervisor: %w: %v", ErrDeterministic, st.Err)
		case StateStopped:
			if st.Err != nil {
				return st.Err
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("supervisor: waiting for a guard server: %w", ctx.Err())
		}
	}
}

// Status returns the current snapshot and a channel closed at the next
// change.
func (s *Supervisor) Status() (Status, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Children = append([]ChildState(nil), st.Children...)
	st.PIDs = append([]int(nil), st.PIDs...)
	return st, s.changed
}

// URL is the base URL of the serving guard server, "" when none serves.
// It changes on fallback and restart.
func (s *Supervisor) URL() string { st, _ := s.Status(); return st.URL }

// State is the supervisor's current state.
func (s *Supervisor) State() State { st, _ := s.Status(); return st.State }

// Device is the serving device (zero when none serves).
func (s *Supervisor) Device() devices.Device { st, _ := s.Status(); return st.Device }

// WaitServing blocks until a server is ready (returning its URL), the
// supervisor is deterministic-only or stopped (ErrDeterministic), or ctx
// ends.
func (s *Supervisor) WaitServing(ctx context.Context) (string, error) {
	for {
		st, ch := s.Status()
		if st.URL != "" {
			return st.URL, nil
		}
		if st.State == StateDeterministic || (st.State == StateStopped && s.isStarted()) {
			return "", ErrDeterministic
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

func (s *Supervisor) isStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// Stop stops every server (SIGTERM to each process group, SIGKILL after
// StopGrace) and waits for them, or until ctx ends.
func (s *Supervisor) Stop(ctx context.Context) error {
	if !s.isStarted() {
		return nil
	}
	done := make(chan struct{})
	select {
	case s.stopReq <- done:
	case <-s.loopDone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("supervisor: stop: %w", ctx.Err())
	}
}

// loop is the supervisor's owner goroutine.
func (s *Supervisor) loop() {
	defer close(s.loopDone)
	cfg := &s.cfg
	n := len(cfg.Chain)
	kids := make([]*child, n)
	states := make([]ChildState, n)
	urls := make([]string, n)
	pids := make([]int, n)
	var lastErr error
	startChild := func(i int) {
		if i >= n || kids[i] != nil {
			return
		}
		kids[i] = &child{idx: i, dev: cfg.Chain[i], cfg: cfg, updates: s.updates,
			stop: make(chan struct{}), stopped: make(chan struct{})}
		states[i] = ChildStarting
		go kids[i].run()
	}
	startChild(0)
	if cfg.HotStandby {
		startChild(1)
	}
	s.publish(states, urls, pids, lastErr, false)
	for {
		select {
		case u := <-s.updates:
			prev := states[u.idx]
			states[u.idx], urls[u.idx], pids[u.idx] = u.state, u.url, u.pid
			if u.state != ChildReady && u.state != ChildUnhealthy {
				urls[u.idx] = ""
			}
			if u.err != nil {
				lastErr = fmt.Errorf("%s: %w", cfg.Chain[u.idx].Label(), u.err)
			}
			if prev != u.state || u.err != nil {
				s.cfg.Bus.Publish(events.Event{Kind: events.GuardStatus, Upstream: cfg.Name,
					GuardDevice: cfg.Chain[u.idx].Label(), GuardState: u.state.String(), Error: errString(u.err)})
			}
			// A failing link brings up the next one (and its standby).
			if u.state == ChildFailed || u.state == ChildRestarting {
				startChild(u.idx + 1)
				if cfg.HotStandby {
					startChild(u.idx + 2)
				}
			}
			s.publish(states, urls, pids, lastErr, false)
		case done := <-s.stopReq:
			for _, k := range kids {
				if k != nil {
					close(k.stop)
				}
			}
			for _, k := range kids {
				if k == nil {
					continue
				}
				for waiting := true; waiting; {
					select {
					case u := <-s.updates:
						states[u.idx] = u.state
					case <-k.stopped:
						waiting = false
					}
				}
			}
			for i := range states {
				if states[i] != ChildFailed {
					states[i] = ChildStopped
				}
				urls[i], pids[i] = "", 0
			}
			s.publish(states, urls, pids, lastErr, true)
			close(done)
			return
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// publish derives the supervisor state from the children and wakes
// waiters. Only the loop goroutine calls it.
func (s *Supervisor) publish(states []ChildState, urls []string, pids []int, lastErr error, stopped bool) {
	st := Status{Children: append([]ChildState(nil), states...), PIDs: append([]int(nil), pids...), Err: lastErr}
	switch {
	case stopped:
		st.State = StateStopped
	default:
		serving := -1
		for i, cs := range states {
			if (cs == ChildReady || cs == ChildUnhealthy) && urls[i] != "" {
				serving = i
				break
			}
		}
		allFailed := true
		anyStarting := false
		for _, cs := range states {
			allFailed = allFailed && cs == ChildFailed
			anyStarting = anyStarting || cs == ChildStarting
		}
		switch {
		case serving == 0:
			st.State = StateReady
		case serving > 0:
			st.State = StateFallback
		case allFailed:
			st.State = StateDeterministic
		case anyStarting && lastErr == nil:
			st.State = StateStarting
		default:
			st.State = StateRestarting
		}
		if serving >= 0 {
			st.URL, st.Device = urls[serving], s.cfg.Chain[serving]
		}
	}
	s.mu.Lock()
	prev := s.status
	s.status = st
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	if prev.State != st.State || prev.URL != st.URL {
		dev := ""
		if st.URL != "" {
			dev = st.Device.Label()
		}
		s.cfg.Bus.Publish(events.Event{Kind: events.GuardStatus, Upstream: s.cfg.Name,
			GuardDevice: dev, GuardState: st.State.String(), Error: errString(st.Err)})
	}
}

// HTTPClient returns a client whose requests go to the serving guard
// server: the request URL's scheme and host are replaced by URL(). A
// request that fails before any response byte (the server died) is sent
// again, once per server change, to whatever serves next, so a crash loses
// no request. With no server left it fails with ErrDeterministic. Each
// server gets UnhealthyAfter+1 tries: by then a dead or hung server has
// been noticed and replaced.
func (s *Supervisor) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: llamaserver.Failover(s, s.cfg.UnhealthyAfter+1, s.cfg.HealthInterval, nil)}
}

// AwayFrom waits until the server at base no longer serves (another
// serves, or none will) or wait has passed; it fails only when ctx ends
// first.
func (s *Supervisor) AwayFrom(ctx context.Context, base string, wait time.Duration) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		st, ch := s.Status()
		if st.URL != base || st.State == StateDeterministic || st.State == StateStopped {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
