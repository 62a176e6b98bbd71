package fleet

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aegis-sentinel/aegis/internal/events"
)

// Buffer is how many events a Gateway buffers from the bus before the bus
// drops events for it (and counts them).
const Buffer = 4096

// Gateway publishes one gateway's events on aegis.events.<name>, counts
// its totals, and announces it to the fleet.
type Gateway struct {
	nc      *nats.Conn
	name    string
	listen  string
	started time.Time
	subject string
	sub     *events.Subscription

	mu        sync.Mutex
	totals    Totals
	published atomic.Uint64
	lost      atomic.Uint64
	done      chan struct{}
}

// NewGateway subscribes to bus now, so no later event is missed; Run
// publishes.
func NewGateway(nc *nats.Conn, bus *events.Bus, name, listen string) *Gateway {
	return &Gateway{nc: nc, name: name, listen: listen, started: time.Now(), subject: SubjectEvents + "." + Token(name),
		sub: bus.Subscribe(Buffer), totals: Totals{Outcomes: map[string]uint64{}}, done: make(chan struct{})}
}

// Subject is where the gateway's events go.
func (g *Gateway) Subject() string { return g.subject }

// Published returns how many events went out.
func (g *Gateway) Published() uint64 { return g.published.Load() }

// Run publishes events and announces the gateway until ctx ends. Events
// published while NATS is unreachable wait in the client's reconnect
// buffer (8 MiB); beyond it they are dropped and counted (Totals.EventsLost),
// and nothing waits on NATS.
func (g *Gateway) Run(ctx context.Context) error {
	defer close(g.done)
	if err := Announce(ctx, g.nc, g.Member); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			g.sub.Close()
			return nil
		case e, ok := <-g.sub.C:
			if !ok {
				return nil
			}
			g.count(e)
			e.Text = "" // outputs stay on the gateway (and in the incident log, if configured)
			b, err := json.Marshal(e)
			if err != nil {
				continue
			}
			// Counted before it is handed over, so a roll call answered
			// after a watcher saw the event never reports fewer events
			// than were seen.
			g.published.Add(1)
			if g.nc.Publish(g.subject, b) != nil {
				g.published.Add(^uint64(0))
				g.lost.Add(1) // NATS unreachable and its reconnect buffer full
			}
		}
	}
}

func (g *Gateway) count(e events.Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch e.Kind {
	case events.RequestStarted:
		g.totals.Requests++
		g.totals.InFlight++
	case events.RequestFinished:
		g.totals.InFlight--
		if e.Outcome != "" {
			g.totals.Outcomes[e.Outcome]++
		}
	case events.Retry:
		g.totals.Retries++
	case events.Halt:
		g.totals.Halts++
	}
}

// Member is the gateway's announcement.
func (g *Gateway) Member() Member {
	g.mu.Lock()
	t := g.totals
	t.Outcomes = make(map[string]uint64, len(g.totals.Outcomes))
	for k, v := range g.totals.Outcomes {
		t.Outcomes[k] = v
	}
	g.mu.Unlock()
	t.Events = g.published.Load()
	t.EventsLost = g.lost.Load()
	return Member{Role: RoleGateway, ID: g.name, Host: Hostname(), Started: g.started, Listen: g.listen, Totals: &t}
}
