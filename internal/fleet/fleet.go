// Package fleet joins gateways and guard workers on different machines
// through a NATS server: each member announces itself (what it is, where
// it runs, what it measured) on a shared subject, answers roll calls, and
// gateways publish their request events for any other gateway's dashboard
// or `aegis fleet` to show. One PC needs none of it.
//
// Subjects:
//
//	aegis.fleet.announce      a Member, every AnnounceEvery, from every member
//	aegis.fleet.rollcall      a request; every member replies with its Member
//	aegis.events.<gateway>    one JSON events.Event per request lifecycle event
package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/nats-io/nats.go"
)

// Subjects shared by every member.
const (
	SubjectAnnounce = "aegis.fleet.announce"
	SubjectRollCall = "aegis.fleet.rollcall"
	SubjectEvents   = "aegis.events" // + "." + gateway name
)

// AnnounceEvery is how often a member announces itself; a member not heard
// from for three periods is gone.
const AnnounceEvery = time.Second

// Role says what a member does.
type Role int

// The roles.
const (
	RoleGateway Role = iota
	RoleGuardWorker
)

func (r Role) String() string {
	if r == RoleGuardWorker {
		return "guard-worker"
	}
	return "gateway"
}

// MarshalText encodes the role by name.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText decodes a role name.
func (r *Role) UnmarshalText(b []byte) error {
	switch string(b) {
	case "gateway":
		*r = RoleGateway
	case "guard-worker":
		*r = RoleGuardWorker
	default:
		return fmt.Errorf("unknown fleet role %q", b)
	}
	return nil
}

// Member is what one gateway or guard worker says about itself.
type Member struct {
	Role    Role      `json:"role"`
	ID      string    `json:"id"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`

	// Guard workers: the model, the subject it serves, the device its
	// llama-server runs on, and the measured time to verdict.
	Model      string        `json:"model,omitempty"`
	Subject    string        `json:"subject,omitempty"`
	Device     string        `json:"device,omitempty"`
	VerdictP50 time.Duration `json:"verdict_p50_ns,omitempty"`
	VerdictP99 time.Duration `json:"verdict_p99_ns,omitempty"`
	Calls      uint64        `json:"calls,omitempty"`
	Errors     uint64        `json:"errors,omitempty"`
	InFlight   int           `json:"in_flight,omitempty"`

	// Gateways: where they listen and what they have handled.
	Listen string  `json:"listen,omitempty"`
	Totals *Totals `json:"totals,omitempty"`
}

// Totals count a gateway's requests by outcome.
type Totals struct {
	Requests uint64            `json:"requests"`
	InFlight int64             `json:"in_flight"`
	Outcomes map[string]uint64 `json:"outcomes,omitempty"`
	Retries  uint64            `json:"retries"`
	Halts    uint64            `json:"halts"`
	Events   uint64            `json:"events_published"`
	// EventsLost counts events that could not be handed to NATS.
	EventsLost uint64 `json:"events_lost,omitempty"`
}

// Connect dials NATS for a long-lived member: it keeps reconnecting for
// ever (also when the server is down at start), so a member outlives a
// NATS restart without help. name shows in the server's connection list.
func Connect(url, name string, log *slog.Logger) (*nats.Conn, error) {
	if log == nil {
		log = slog.Default()
	}
	nc, err := nats.Connect(url, nats.Name(name),
		nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true),
		nats.ReconnectBufSize(8<<20), nats.PingInterval(5*time.Second), nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("NATS connection lost; reconnecting", "url", url, "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("NATS reconnected", "url", c.ConnectedUrlRedacted()) }),
	)
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", url, err)
	}
	return nc, nil
}

// Hostname is the local host name, or "localhost".
func Hostname() string {
	h, _ := os.Hostname()
	if h == "" {
		return "localhost"
	}
	return h
}

// Token makes s safe as one NATS subject token: letters, digits, '-' and
// '_' stay, everything else becomes '_'.
func Token(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}

// Announce publishes what self returns every AnnounceEvery and answers
// roll calls, until ctx ends.
func Announce(ctx context.Context, nc *nats.Conn, self func() Member) error {
	sub, err := nc.Subscribe(SubjectRollCall, func(m *nats.Msg) {
		if b, err := json.Marshal(self()); err == nil {
			m.Respond(b)
		}
	})
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	go func() {
		defer sub.Unsubscribe()
		t := time.NewTicker(AnnounceEvery)
		defer t.Stop()
		for {
			if b, err := json.Marshal(self()); err == nil {
				nc.Publish(SubjectAnnounce, b)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// RollCall asks every member to report and collects the answers that
// arrive within wait, gateways first, then by ID.
func RollCall(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]Member, error) {
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(SubjectRollCall, inbox, nil); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	if err := nc.FlushTimeout(max(wait, time.Second)); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	seen := map[string]Member{}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case m := <-ch:
			var mem Member
			if json.Unmarshal(m.Data, &mem) == nil && mem.ID != "" {
				seen[mem.Role.String()+"/"+mem.ID] = mem
			}
		case <-timer.C:
			return sorted(seen), nil
		case <-ctx.Done():
			return sorted(seen), ctx.Err()
		}
	}
}

func sorted(m map[string]Member) []Member {
	out := make([]Member, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sortMembers(out)
	return out
}

// View keeps the members heard on the announce subject, for a dashboard.
type View struct {
	mu      sync.Mutex
	members map[string]seenMember
	clk     clock.Clock
}

type seenMember struct {
	m    Member
	seen time.Time
}

// Watch subscribes to announcements and returns a view kept current until
// ctx ends. clk is the clock (nil: the wall clock).
func Watch(ctx context.Context, nc *nats.Conn, clk clock.Clock) (*View, error) {
	v := &View{members: map[string]seenMember{}, clk: clock.Or(clk)}
	sub, err := nc.Subscribe(SubjectAnnounce, func(msg *nats.Msg) {
		var m Member
		if json.Unmarshal(msg.Data, &m) != nil || m.ID == "" {
			return
		}
		v.mu.Lock()
		v.members[m.Role.String()+"/"+m.ID] = seenMember{m, v.clk.Now()}
		v.mu.Unlock()
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	go func() { <-ctx.Done(); sub.Unsubscribe() }()
	return v, nil
}

// Members returns the members heard within the last three announce
// periods.
func (v *View) Members() []Member {
	v.mu.Lock()
	defer v.mu.Unlock()
	cut := v.clk.Now().Add(-3 * AnnounceEvery)
	var out []Member
	for k, s := range v.members {
		if s.seen.Before(cut) {
			delete(v.members, k)
			continue
		}
		out = append(out, s.m)
	}
	sortMembers(out)
	return out
}

// Sum adds up the gateways' totals.
func Sum(ms []Member) Totals {
	t := Totals{Outcomes: map[string]uint64{}}
	for _, m := range ms {
		if m.Totals == nil {
			continue
		}
		t.Requests += m.Totals.Requests
		t.InFlight += m.Totals.InFlight
		t.Retries += m.Totals.Retries
		t.Halts += m.Totals.Halts
		t.Events += m.Totals.Events
		t.EventsLost += m.Totals.EventsLost
		for k, n := range m.Totals.Outcomes {
			t.Outcomes[k] += n
		}
	}
	return t
}

func sortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int {
		if a.Role != b.Role {
			return int(a.Role) - int(b.Role)
		}
		return strings.Compare(a.ID, b.ID)
	})
}
