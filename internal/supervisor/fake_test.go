package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/llamaproc"
)

// fakeClock drives a clock.Fake: every timer the supervisor arms is
// fired at once by advancing the fake by its duration (with a tiny real
// sleep so polling loops do not spin hot), and the long waits, which are
// the backoffs, are recorded.
type fakeClock struct {
	*clock.Fake
	mu      sync.Mutex
	backoff []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{Fake: clock.NewFake(time.Unix(1_000_000, 0))} }

func (c *fakeClock) NewTimer(d time.Duration) clock.Timer {
	if d >= 100*time.Millisecond {
		c.mu.Lock()
		c.backoff = append(c.backoff, d)
		c.mu.Unlock()
	}
	t := c.Fake.NewTimer(d)
	c.Advance(d)
	time.Sleep(200 * time.Microsecond)
	return t
}

func (c *fakeClock) backoffs() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.backoff...)
}

// behaviour scripts one fake server run.
type behaviour struct {
	startErr   bool // the starter itself fails
	loadProbes int  // probes answered "loading" before ready
	exitAfter  int  // exit after this many ok probes (0 = never)
	hangAfter  int  // answer "down" after this many ok probes (0 = never)
	blipAt     int  // answer "down" once, at this ok probe (0 = never)
	never      bool // never becomes ready (loading forever)
	output     []string
	exitAtOnce bool // print output, then exit before any probe
	// goneAfter: the port refuses connections after this many ok probes
	// (0 = never), and the process is reaped only once reap is closed
	// (a killed process that takes long to exit).
	goneAfter int
	reap      chan struct{}
}

type fakeProc struct {
	pid    int
	dev    string
	b      behaviour
	done   chan struct{}
	once   sync.Once
	err    error
	probes int
	args   []string
	env    []string
}

func (p *fakeProc) Pid() int              { return p.pid }
func (p *fakeProc) Done() <-chan struct{} { return p.done }
func (p *fakeProc) Err() error            { return p.err }
func (p *fakeProc) exit(err error) {
	p.once.Do(func() { p.err = err; close(p.done) })
}
func (p *fakeProc) Signal(sig syscall.Signal) error {
	if p.b.reap != nil {
		go func() { <-p.b.reap; p.exit(fmt.Errorf("signal: %v", sig)) }()
		return nil
	}
	p.exit(fmt.Errorf("signal: %v", sig))
	return nil
}

// fakeWorld is the fake process table: a starter, a health func and a
// port picker for Config.
type fakeWorld struct {
	mu     sync.Mutex
	script func(dev string, n int) behaviour
	starts map[string]int
	byURL  map[string]*fakeProc
	all    []*fakeProc
	port   int
}

func newFakeWorld(script func(dev string, n int) behaviour) *fakeWorld {
	return &fakeWorld{script: script, starts: map[string]int{}, byURL: map[string]*fakeProc{}, port: 40000}
}

func argAfter(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func (w *fakeWorld) start(_ context.Context, s llamaproc.Spec) (llamaproc.Process, error) {
	dev := argAfter(s.Args, "-dev")
	w.mu.Lock()
	w.starts[dev]++
	n := w.starts[dev]
	b := w.script(dev, n)
	if b.startErr {
		w.mu.Unlock()
		return nil, errors.New("fake: exec failed")
	}
	p := &fakeProc{pid: 1000 + len(w.all), dev: dev, b: b, done: make(chan struct{}), args: s.Args, env: s.Env}
	w.all = append(w.all, p)
	w.byURL["http://127.0.0.1:"+argAfter(s.Args, "--port")] = p
	w.mu.Unlock()
	for _, l := range b.output {
		s.Output(l)
	}
	if b.exitAtOnce {
		p.exit(errors.New("exit status 1"))
	}
	return p, nil
}

func (w *fakeWorld) health(_ context.Context, url string) Health {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.byURL[url]
	if p == nil {
		return HealthDown
	}
	select {
	case <-p.done:
		return HealthDown
	default:
	}
	p.probes++
	b := p.b
	switch {
	case b.never:
		return HealthLoading
	case p.probes <= b.loadProbes:
		return HealthLoading
	}
	ok := p.probes - b.loadProbes
	if b.goneAfter > 0 && ok > b.goneAfter {
		return HealthGone
	}
	if b.exitAfter > 0 && ok > b.exitAfter {
		p.exit(errors.New("signal: killed"))
		return HealthDown
	}
	if b.hangAfter > 0 && ok > b.hangAfter {
		return HealthDown
	}
	if b.blipAt > 0 && ok == b.blipAt {
		return HealthDown
	}
	return HealthOK
}

func (w *fakeWorld) pickPort() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.port++
	return w.port, nil
}

func (w *fakeWorld) count(dev string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.starts[dev]
}

// live returns the fake processes that have not exited.
func (w *fakeWorld) live() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, p := range w.all {
		select {
		case <-p.done:
		default:
			out = append(out, fmt.Sprintf("%s pid %d", p.dev, p.pid))
		}
	}
	return out
}

func (w *fakeWorld) current(dev string) *fakeProc {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.all) - 1; i >= 0; i-- {
		if w.all[i].dev == dev {
			return w.all[i]
		}
	}
	return nil
}

func (w *fakeWorld) config(chain ...devices.Device) (Config, *fakeClock) {
	clk := newFakeClock()
	return Config{
		Binary: "llama-server", Model: "/models/guard.gguf", Chain: chain,
		StartPoll: time.Millisecond, HealthInterval: 2 * time.Millisecond, StartTimeout: time.Second,
		BackoffBase: 100 * time.Millisecond, BackoffMax: 400 * time.Millisecond, StopGrace: time.Second,
		Clock: clk, Starter: w.start, Health: w.health, PickPort: w.pickPort,
	}, clk
}

func joinArgs(a []string) string { return strings.Join(a, " ") }
