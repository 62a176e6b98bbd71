package supervisor

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/llamaproc"
)

// ChildState is the state of one guard server process.
type ChildState int

// Child states. See the package documentation for the transitions.
const (
	ChildStopped ChildState = iota
	ChildStarting
	ChildReady
	ChildUnhealthy
	ChildRestarting
	ChildFailed
)

func (s ChildState) String() string {
	switch s {
	case ChildStopped:
		return "stopped"
	case ChildStarting:
		return "starting"
	case ChildReady:
		return "ready"
	case ChildUnhealthy:
		return "unhealthy"
	case ChildRestarting:
		return "restarting"
	case ChildFailed:
		return "failed"
	}
	return "unknown"
}

// Errors a child run ends with; Failure wraps one of them.
var (
	ErrExited        = errors.New("server exited")
	ErrHung          = errors.New("server stopped answering /health")
	ErrGone          = errors.New("server stopped listening on its port")
	ErrStartTimeout  = errors.New("server did not become ready in time")
	ErrOutOfMemory   = errors.New("server ran out of device memory")
	ErrLoadFailed    = errors.New("server could not load the model")
	ErrOverBudget    = errors.New("model and KV cache exceed the device memory budget")
	ErrDeterministic = errors.New("no guard server available: deterministic checks only")
)

// oomLine matches llama.cpp and driver messages for failed device
// allocations (CUDA, HIP, Vulkan, SYCL/Level Zero, host).
var oomLine = regexp.MustCompile(`(?i)out of memory|ErrorOutOfDeviceMemory|OUT_OF_DEVICE_MEMORY|cudaMalloc failed|hipMalloc failed|failed to allocate .*buffer|unable to allocate .*buffer|std::bad_alloc`)

// fatalLine matches messages after which a restart on the same device
// cannot help.
var bindLine = regexp.MustCompile(`(?i)couldn't bind|failed to bind|address already in use`)

var fatalLine = regexp.MustCompile(`(?i)failed to load model|error loading model|invalid device|unknown device|failed to initialize .* backend`)

// child runs one server process for one device: start, wait for health,
// watch, restart with backoff, give up. Its goroutine is the only owner
// of the process and its state; it reports every change on updates.
type child struct {
	idx     int
	dev     devices.Device
	cfg     *Config
	updates chan<- childUpdate
	stop    chan struct{}
	stopped chan struct{}

	mu         sync.Mutex
	lines      []string // last output lines, for error messages
	oom        bool
	fatal      string
	bindFailed bool // the server could not bind its port
}

type childUpdate struct {
	idx   int
	state ChildState
	url   string
	pid   int
	err   error
}

// report sends a state change to the supervisor's owner goroutine, which
// keeps reading updates until every child has ended.
func (c *child) report(s ChildState, url string, pid int, err error) {
	c.updates <- childUpdate{c.idx, s, url, pid, err}
}

func (c *child) output(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.lines) == 20 {
		copy(c.lines, c.lines[1:])
		c.lines = c.lines[:19]
	}
	c.lines = append(c.lines, line)
	if oomLine.MatchString(line) {
		c.oom = true
	}
	if bindLine.MatchString(line) {
		c.bindFailed = true
	}
	if c.fatal == "" && fatalLine.MatchString(line) {
		c.fatal = line
	}
	if c.cfg.Log != nil {
		c.cfg.Log(c.dev.Name, line)
	}
}

// maxBindRetries bounds the starts on a fresh port after the server could
// not bind the one it was given.
const maxBindRetries = 5

// tookBindFailure reports, once, whether the server said it could not
// bind its port.
func (c *child) tookBindFailure() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.bindFailed
	c.bindFailed = false
	return b
}

func (c *child) tail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines, "\n")
}

// classify wraps a run's end in the error that decides what happens next.
func (c *child) classify(err error) error {
	c.mu.Lock()
	oom, fatal := c.oom, c.fatal
	c.oom, c.fatal = false, ""
	c.mu.Unlock()
	switch {
	case oom:
		return fmt.Errorf("%w (%v)", ErrOutOfMemory, err)
	case fatal != "":
		return fmt.Errorf("%w: %s (%v)", ErrLoadFailed, fatal, err)
	}
	return err
}

// run is the child's owner goroutine.
func (c *child) run() {
	defer close(c.stopped)
	cfg := c.cfg
	if est, budget := cfg.estimate(), c.dev.Free; budget > 0 && est > budget {
		c.report(ChildFailed, "", 0, fmt.Errorf("%w: %s needs ~%d MiB, budget %d MiB", ErrOverBudget, c.dev.Name, est, budget))
		return
	}
	failures, binds := 0, 0
	for {
		select {
		case <-c.stop:
			c.report(ChildStopped, "", 0, nil)
			return
		default:
		}
		// PickPort's port is free when picked, not when the server binds
		// it: another process may take it in between. The server then
		// exits saying so, and is started again at once on another port,
		// without counting a failure.
		port, err := cfg.PickPort()
		if err != nil {
			c.report(ChildFailed, "", 0, err)
			return
		}
		url := "http://127.0.0.1:" + strconv.Itoa(port)
		c.report(ChildStarting, url, 0, nil)
		proc, err := cfg.Starter(context.Background(), cfg.launch(c.dev, port).Spec(c.output))
		var readySince time.Time
		if err == nil {
			err = c.waitReady(proc, url)
			if err == nil {
				readySince = cfg.Clock.Now()
				c.report(ChildReady, url, proc.Pid(), nil)
				err = c.leave(proc, c.watch(proc, url))
			}
			c.kill(proc)
		}
		if errors.Is(err, errStopping) {
			c.report(ChildStopped, "", 0, nil)
			return
		}
		if c.tookBindFailure() && readySince.IsZero() && binds < maxBindRetries {
			binds++
			c.classify(err)
			continue
		}
		err = c.classify(err)
		if !readySince.IsZero() && cfg.Clock.Now().Sub(readySince) >= cfg.StableAfter {
			failures = 0 // it ran well for a while: a fresh failure
		}
		failures++
		if errors.Is(err, ErrOutOfMemory) || errors.Is(err, ErrLoadFailed) || failures > cfg.MaxRestarts {
			if t := c.tail(); t != "" && !errors.Is(err, ErrOutOfMemory) && !errors.Is(err, ErrLoadFailed) {
				err = fmt.Errorf("%w; last output:\n%s", err, t)
			}
			c.report(ChildFailed, "", 0, err)
			return
		}
		c.report(ChildRestarting, "", 0, err)
		select {
		case <-c.stop:
			c.report(ChildStopped, "", 0, nil)
			return
		case <-clock.After(cfg.Clock, cfg.backoff(failures)):
		}
	}
}

var errStopping = errors.New("stopping")

// waitReady polls health until 200, the process exits, the start timeout
// passes, or Stop.
func (c *child) waitReady(p llamaproc.Process, url string) error {
	cfg := c.cfg
	deadline := cfg.Clock.Now().Add(cfg.StartTimeout)
	for {
		select {
		case <-c.stop:
			return errStopping
		case <-p.Done():
			return fmt.Errorf("%w during start: %v", ErrExited, p.Err())
		default:
		}
		if c.probe(url) == HealthOK {
			select {
			case <-p.Done(): // what answered is not ours (it took the port)
				return fmt.Errorf("%w during start: %v", ErrExited, p.Err())
			default:
				return nil
			}
		}
		if !cfg.Clock.Now().Before(deadline) {
			return fmt.Errorf("%w (%s)", ErrStartTimeout, cfg.StartTimeout)
		}
		select {
		case <-c.stop:
			return errStopping
		case <-p.Done():
			return fmt.Errorf("%w during start: %v", ErrExited, p.Err())
		case <-clock.After(cfg.Clock, cfg.StartPoll):
		}
	}
}

// watch polls health while the server runs; it returns when the process
// exits, its port refuses connections, health fails UnhealthyAfter times
// in a row, or Stop.
func (c *child) watch(p llamaproc.Process, url string) error {
	cfg := c.cfg
	bad := 0
	for {
		select {
		case <-c.stop:
			return errStopping
		case <-p.Done():
			return fmt.Errorf("%w: %v", ErrExited, p.Err())
		case <-clock.After(cfg.Clock, cfg.HealthInterval):
		}
		switch c.probe(url) {
		case HealthGone:
			// The port closed: the process is going away (a killed
			// one closes its sockets before it is reaped); see leave.
			return ErrGone
		case HealthOK:
			if bad > 0 {
				c.report(ChildReady, url, p.Pid(), nil)
			}
			bad = 0
		default:
			// An exit seen by the probe is an exit, not a hang.
			select {
			case <-p.Done():
				return fmt.Errorf("%w: %v", ErrExited, p.Err())
			default:
			}
			bad++
			if bad == 1 {
				c.report(ChildUnhealthy, url, p.Pid(), nil)
			}
			if bad >= cfg.UnhealthyAfter {
				return fmt.Errorf("%w (%d failed probes)", ErrHung, bad)
			}
		}
	}
}

func (c *child) probe(url string) Health {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ProbeTimeout)
	defer cancel()
	return c.cfg.Health(ctx, url)
}

// leave takes a server that stopped serving (watch returned err) out of
// service before it is stopped and waited for: a hung process waits out
// StopGrace, and a dying one may be slow to be reaped; its requests
// belong on the standby meanwhile. A process already reaped, or one being
// stopped, needs nothing. A server whose port closed (ErrGone) is given
// a probe interval to exit, so that a kill is reported as the exit it is;
// leave returns the error the run ended with.
func (c *child) leave(p llamaproc.Process, err error) error {
	if err == nil || errors.Is(err, errStopping) {
		return err
	}
	select {
	case <-p.Done():
		return err
	default:
	}
	c.report(ChildUnhealthy, "", p.Pid(), nil)
	if !errors.Is(err, ErrGone) {
		return err
	}
	select {
	case <-p.Done():
		return fmt.Errorf("%w: %v", ErrExited, p.Err())
	case <-c.stop:
		return errStopping
	case <-clock.After(c.cfg.Clock, c.cfg.HealthInterval):
		return err
	}
}

// kill stops the process group: SIGTERM, then SIGKILL after StopGrace.
// It returns when the process has been reaped.
func (c *child) kill(p llamaproc.Process) { llamaproc.Stop(p, c.cfg.StopGrace) }
