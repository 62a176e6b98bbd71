package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aegis-sentinel/aegis/internal/approval"
	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/events"
)

// SubjectApprovals carries approval notices, + "." + the token of the
// gateway that holds the call: {"gateway", "id", "stage"}, never a record
// or an argument. A notice only hurries things: the decision itself is
// read from the shared store, so a forged notice releases nothing.
const SubjectApprovals = "aegis.approvals"

// DefaultPollEvery is how often a gateway that holds calls reads the
// shared store for decisions taken elsewhere; a notice on NATS makes it
// look at once, so this bounds the delay while NATS is down.
const DefaultPollEvery = 2 * time.Second

// storeTimeout bounds each call to the shared store.
const storeTimeout = 2 * time.Second

// maxUnsettled bounds the stages kept for the store while it is away.
const maxUnsettled = 10_000

// ApprovalsConfig is what a gateway's share of the fleet's approvals
// needs.
type ApprovalsConfig struct {
	// Queue holds this gateway's calls; Shared is the fleet's store of
	// them; Gateway is this gateway's name in it.
	Queue   *approval.Queue
	Shared  approval.Shared
	Gateway string
	// Bus carries this gateway's approval events (proposed, decided,
	// released...), which Approvals writes to the store.
	Bus *events.Bus
	// NATS, when set, carries the notices; nil means the store alone
	// (decisions are found by polling).
	NATS *nats.Conn
	// Clock times the polling (nil: the wall clock); PollEvery is its
	// interval (zero: DefaultPollEvery).
	Clock     clock.Clock
	PollEvery time.Duration
	Logger    *slog.Logger
}

// Approvals is one gateway's part in the fleet's approvals: it is the
// Desk of the approvals API and the dashboard (every gateway's held
// calls, from the shared store; a decision is recorded there, first one
// wins, and announced to the holding gateway on NATS), and its Run loop
// writes this gateway's calls and their stages to the store and hands
// the decisions taken elsewhere to the local queue: at once on a notice,
// and by polling the store every PollEvery in any case.
type Approvals struct {
	// Changed, when set, is called when another gateway of the fleet
	// held, decided or ended a call (the dashboard reloads its list). It
	// must not block.
	Changed func()

	c    ApprovalsConfig
	clk  clock.Clock
	log  *slog.Logger
	sub  *events.Subscription
	wake chan string

	// Owned by Run's goroutine: the local calls the store knows, and
	// the stages still to write there.
	shared    map[string]bool
	unsettled map[string]events.ApprovalRecord
}

var _ approval.Desk = (*Approvals)(nil)

// NewApprovals subscribes to the bus now, so no approval event is missed
// before Run.
func NewApprovals(c ApprovalsConfig) *Approvals {
	if c.PollEvery <= 0 {
		c.PollEvery = DefaultPollEvery
	}
	a := &Approvals{c: c, clk: clock.Or(c.Clock), log: c.Logger, sub: c.Bus.Subscribe(Buffer), wake: make(chan string, 64),
		shared: map[string]bool{}, unsettled: map[string]events.ApprovalRecord{}}
	if a.log == nil {
		a.log = slog.Default()
	}
	return a
}

type notice struct {
	Gateway string `json:"gateway"`
	ID      string `json:"id"`
	Stage   string `json:"stage"`
}

// Run shares this gateway's calls and applies decisions until ctx ends.
// It first cancels what the store still holds open under this gateway's
// name: a previous run's calls, whose clients are gone.
func (a *Approvals) Run(ctx context.Context) error {
	defer a.sub.Close()
	c, cancel := context.WithTimeout(ctx, storeTimeout)
	n, err := a.c.Shared.Abandon(c, a.c.Gateway, a.clk.Now())
	cancel()
	if err != nil {
		a.log.Warn("approvals: could not cancel a previous run's held calls in the shared store", "err", err)
	} else if n > 0 {
		a.log.Info("approvals: cancelled the held calls of this gateway's previous run", "count", n)
	}
	if a.c.NATS != nil {
		sub, err := a.c.NATS.Subscribe(SubjectApprovals+".>", a.onNotice)
		if err != nil {
			return fmt.Errorf("fleet approvals: %w", err)
		}
		defer sub.Unsubscribe()
	}
	timer := a.clk.NewTimer(a.c.PollEvery)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-a.sub.C:
			if !ok {
				return nil
			}
			if e.Kind == events.Approval && e.Approval != nil {
				a.record(ctx, *e.Approval)
			}
		case id := <-a.wake:
			a.check(ctx, id)
		case <-timer.C():
			a.settle(ctx)
			a.share(ctx)
			a.check(ctx, "")
			timer.Reset(a.c.PollEvery)
		}
	}
}

// onNotice wakes the loop for a decision on one of this gateway's calls,
// and tells the dashboard when another gateway's calls changed.
func (a *Approvals) onNotice(m *nats.Msg) {
	var n notice
	if json.Unmarshal(m.Data, &n) != nil || n.ID == "" {
		return
	}
	if n.Gateway == a.c.Gateway {
		if n.Stage == approval.Approved.String() || n.Stage == approval.Denied.String() {
			select {
			case a.wake <- n.ID:
			default: // the next poll finds it
			}
		}
		return
	}
	if a.Changed != nil {
		a.Changed()
	}
}

func (a *Approvals) notify(gateway, id, stage string) {
	if a.c.NATS == nil {
		return
	}
	b, _ := json.Marshal(notice{Gateway: gateway, ID: id, Stage: stage})
	a.c.NATS.Publish(SubjectApprovals+"."+Token(gateway), b) // a lost notice is found by polling
}

// record writes one stage of a local call to the store (or keeps it for
// later) and announces it.
func (a *Approvals) record(ctx context.Context, r events.ApprovalRecord) {
	if r.Stage == approval.Proposed.String() {
		a.put(ctx, r)
		return
	}
	delete(a.shared, r.ID)
	if !a.put(ctx, r) {
		if len(a.unsettled) >= maxUnsettled {
			a.log.Error("approvals: stage not written to the shared store: too many wait for it", "id", r.ID, "stage", r.Stage)
			return
		}
		a.unsettled[r.ID] = r
	}
}

func (a *Approvals) put(ctx context.Context, r events.ApprovalRecord) bool {
	c, cancel := context.WithTimeout(ctx, storeTimeout)
	err := a.c.Shared.Put(c, a.c.Gateway, r)
	cancel()
	if err != nil {
		a.log.Warn("approvals: shared store unreachable; retrying", "id", r.ID, "stage", r.Stage, "err", err)
		return false
	}
	if r.Stage == approval.Proposed.String() {
		if _, held := a.c.Queue.Get(r.ID); held {
			a.shared[r.ID] = true
		}
	}
	a.notify(a.c.Gateway, r.ID, r.Stage)
	return true
}

// settle retries the stages the store missed.
func (a *Approvals) settle(ctx context.Context) {
	for id, r := range a.unsettled {
		if !a.put(ctx, r) {
			return
		}
		delete(a.unsettled, id)
	}
}

// share writes the local calls the store does not know yet (their
// proposal was missed or the store was away).
func (a *Approvals) share(ctx context.Context) {
	for _, r := range a.c.Queue.Pending() {
		if !a.shared[r.ID] && !a.put(ctx, r) {
			return
		}
	}
}

// check reads the decisions on the local calls in the store (only id,
// when set) and hands them to the queue.
func (a *Approvals) check(ctx context.Context, id string) {
	var ids []string
	for _, r := range a.c.Queue.Pending() {
		if a.shared[r.ID] && (id == "" || r.ID == id) {
			ids = append(ids, r.ID)
		}
	}
	for held := range a.shared { // calls that left the queue without an event
		if _, ok := a.c.Queue.Get(held); !ok {
			delete(a.shared, held)
		}
	}
	if len(ids) == 0 {
		return
	}
	c, cancel := context.WithTimeout(ctx, storeTimeout)
	decided, err := a.c.Shared.Decided(c, ids)
	cancel()
	if err != nil {
		a.log.Warn("approvals: shared store unreachable; decisions wait", "err", err)
		return
	}
	for _, r := range decided {
		a.deliver(r)
	}
}

// deliver hands a decision from the store to the local queue: an
// approval bound to what the store holds, anything else denies.
func (a *Approvals) deliver(r events.ApprovalRecord) (events.ApprovalRecord, error) {
	d := approval.Decision{By: r.By}
	if r.Stage == approval.Approved.String() {
		d = approval.Decision{Approve: true, ArgsHash: r.ArgsHash, PolicyVersion: r.PolicyVersion, By: r.By}
	} else if d.By == "" {
		d.By = "the fleet (" + r.Stage + ")"
	}
	out, err := a.c.Queue.Decide(r.ID, d)
	out.Gateway = a.c.Gateway
	return out, err
}

// Pending returns every gateway's held calls: the shared store's, and
// this gateway's that have not reached it yet.
func (a *Approvals) Pending(ctx context.Context) ([]events.ApprovalRecord, error) {
	recs, err := a.c.Shared.Pending(ctx, a.clk.Now())
	if err != nil {
		return nil, fmt.Errorf("%w (only each gateway's own held calls can be decided there now): %v", approval.ErrUnavailable, err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		seen[r.ID] = true
	}
	for _, r := range a.c.Queue.Pending() {
		if !seen[r.ID] {
			r.Gateway = a.c.Gateway
			recs = append(recs, r)
		}
	}
	slices.SortFunc(recs, func(x, y events.ApprovalRecord) int {
		if c := x.Time.Compare(y.Time); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	return recs, nil
}

// Lookup returns the held call id, this gateway's or another's.
func (a *Approvals) Lookup(ctx context.Context, id string) (events.ApprovalRecord, error) {
	if r, ok := a.c.Queue.Get(id); ok {
		r.Gateway = a.c.Gateway
		return r, nil
	}
	r, err := a.c.Shared.Lookup(ctx, id)
	switch {
	case err != nil && !approval.IsRefusal(err):
		return r, fmt.Errorf("%w: %v", approval.ErrUnavailable, err)
	case err != nil:
		return r, err
	case r.Stage != approval.Proposed.String():
		return r, fmt.Errorf("%w (%s by %s)", approval.ErrDecided, r.Stage, cmp.Or(r.By, "its gateway"))
	case !r.Deadline.After(a.clk.Now()):
		return r, fmt.Errorf("%w: its deadline passed", approval.ErrNotFound)
	}
	return r, nil
}

// Decide records d in the shared store (the first decision on a call
// wins) and tells the holding gateway; a call held here is answered at
// once. A call held here that the store does not know yet, or while the
// store is unreachable, is decided here alone; its stages reach the
// store later.
func (a *Approvals) Decide(ctx context.Context, id string, d approval.Decision) (events.ApprovalRecord, error) {
	if d.By != "" {
		d.By += " on " + a.c.Gateway
	}
	_, local := a.c.Queue.Get(id)
	r, err := a.c.Shared.Decide(ctx, id, d, a.clk.Now())
	switch {
	case err == nil && local:
		return a.deliver(r)
	case err == nil:
		a.notify(r.Gateway, r.ID, r.Stage)
		return r, nil
	case local && (errors.Is(err, approval.ErrNotFound) || !approval.IsRefusal(err)):
		if !approval.IsRefusal(err) {
			a.log.Warn("approvals: shared store unreachable; deciding a call held here alone", "id", id, "err", err)
		}
		out, err := a.c.Queue.Decide(id, d)
		out.Gateway = a.c.Gateway
		return out, err
	case !approval.IsRefusal(err):
		return r, fmt.Errorf("%w: %v", approval.ErrUnavailable, err)
	}
	return r, err
}
