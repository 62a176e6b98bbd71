// Package approval holds tool calls a policy sends to a person (action:
// approve) until someone decides: the dashboard, `aegis approvals`, or the
// approvals API (Handler) with the gateway's token.
//
// A decision is bound to what was held: it must name the SHA-256 of the
// held calls' canonical arguments (ArgsHash) and the version of the
// policy that asked; a decision for other arguments or another policy
// version is refused, and one taken after the policy was reloaded denies
// the call. The gateway that holds the call waits on the Ticket, with
// its own clock for the timeout, which denies.
//
// A Queue lives in one gateway process, across policy reloads; the
// records travel further as events (the incident log, the fleet's NATS
// subjects).
package approval

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/aegis-sentinel/aegis/internal/events"
)

// Stage is where an approval is.
type Stage int

// The stages, in order. Proposed is pending; the others are decided.
const (
	Proposed  Stage = iota // held, waiting for a person
	Approved               // a person approved the call
	Denied                 // a person denied it, or the policy changed under it
	Expired                // nobody decided before the deadline: denied
	Cancelled              // the client went away
	Released               // the approved call went out to the client
)

var stageNames = [...]string{"proposed", "approved", "denied", "expired", "cancelled", "released"}

func (s Stage) String() string {
	if s >= 0 && int(s) < len(stageNames) {
		return stageNames[s]
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// The errors Decide returns; the API answers them with 404 and 409.
var (
	ErrNotFound      = errors.New("no pending approval with that id (decided, expired or never held)")
	ErrOtherArgs     = errors.New("the decision names other arguments than the held call (args_hash differs)")
	ErrOtherPolicy   = errors.New("the decision names another policy version than the one that held the call")
	ErrPolicyChanged = errors.New("the policy was reloaded since the call was held: the call is denied")
	ErrUnbound       = errors.New("an approval must name the held call's args_hash and policy_version")
)

// Decision is a person's answer. An approval must carry the ArgsHash and
// PolicyVersion of the record it approves; a denial need not.
type Decision struct {
	Approve       bool   `json:"-"`
	ArgsHash      string `json:"args_hash"`
	PolicyVersion string `json:"policy_version"`
	// By names who decided ("dashboard", "cli", or what the API caller
	// says); it is recorded, never trusted for anything.
	By string `json:"by"`
}

// Outcome is how a held call was decided.
type Outcome struct {
	Stage Stage
	// ArgsHash and PolicyVersion are what the approval named: the
	// gateway releases only calls that still hash to them.
	ArgsHash, PolicyVersion string
	By                      string
}

// Ticket is one held call: the gateway waits on Done.
type Ticket struct {
	Record events.ApprovalRecord
	done   chan Outcome
}

// Done receives the outcome once.
func (t *Ticket) Done() <-chan Outcome { return t.done }

// Queue is the pending approvals of one gateway process. The zero value
// is ready to use and safe for concurrent use.
type Queue struct {
	// PolicyVersion, when set, returns the version of the policy in force
	// now: a decision after a reload denies the call it names.
	PolicyVersion func() string
	// OnChange, when set, is called (without the lock) after a call is
	// held or leaves the queue; it must not block.
	OnChange func()

	mu      sync.Mutex
	pending map[string]*Ticket
}

// Hold adds a call to the queue and returns its ticket; the record's ID
// is set when empty, its stage is proposed.
func (q *Queue) Hold(r events.ApprovalRecord) *Ticket {
	if r.ID == "" {
		r.ID = newID()
	}
	r.Stage = Proposed.String()
	t := &Ticket{Record: r, done: make(chan Outcome, 1)}
	q.mu.Lock()
	if q.pending == nil {
		q.pending = map[string]*Ticket{}
	}
	q.pending[r.ID] = t
	q.mu.Unlock()
	q.changed()
	return t
}

// Decide answers the pending call id. An approval naming other arguments
// or another policy version is refused (the call stays pending); after a
// policy reload the call is denied and ErrPolicyChanged returned.
func (q *Queue) Decide(id string, d Decision) (events.ApprovalRecord, error) {
	q.mu.Lock()
	t, ok := q.pending[id]
	if !ok {
		q.mu.Unlock()
		return events.ApprovalRecord{}, ErrNotFound
	}
	r := t.Record
	out := Outcome{Stage: Denied, By: d.By}
	var err error
	switch {
	case q.PolicyVersion != nil && q.PolicyVersion() != r.PolicyVersion:
		err = ErrPolicyChanged
		out.By = "policy reload"
	case !d.Approve:
	case d.ArgsHash == "" || d.PolicyVersion == "":
		q.mu.Unlock()
		return r, ErrUnbound
	case d.ArgsHash != r.ArgsHash:
		q.mu.Unlock()
		return r, ErrOtherArgs
	case d.PolicyVersion != r.PolicyVersion:
		q.mu.Unlock()
		return r, ErrOtherPolicy
	default:
		out = Outcome{Stage: Approved, ArgsHash: d.ArgsHash, PolicyVersion: d.PolicyVersion, By: d.By}
	}
	delete(q.pending, id)
	q.mu.Unlock()
	t.done <- out
	q.changed()
	r.Stage, r.By = out.Stage.String(), out.By
	return r, err
}

// Expire denies t when it is still pending (its deadline passed) and
// reports whether it did; false means a decision came first and is on
// Done.
func (q *Queue) Expire(t *Ticket) bool { return q.remove(t, Expired) }

// Cancel drops t (the client went away) unless it was decided.
func (q *Queue) Cancel(t *Ticket) { q.remove(t, Cancelled) }

func (q *Queue) remove(t *Ticket, s Stage) bool {
	q.mu.Lock()
	cur, ok := q.pending[t.Record.ID]
	if !ok || cur != t {
		q.mu.Unlock()
		return false
	}
	delete(q.pending, t.Record.ID)
	q.mu.Unlock()
	t.done <- Outcome{Stage: s}
	q.changed()
	return true
}

// Pending returns the held calls, oldest first.
func (q *Queue) Pending() []events.ApprovalRecord {
	q.mu.Lock()
	out := make([]events.ApprovalRecord, 0, len(q.pending))
	for _, t := range q.pending {
		out = append(out, t.Record)
	}
	q.mu.Unlock()
	slices.SortFunc(out, func(a, b events.ApprovalRecord) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return compareStrings(a.ID, b.ID)
	})
	return out
}

// Get returns the pending call id.
func (q *Queue) Get(id string) (events.ApprovalRecord, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t, ok := q.pending[id]
	if !ok {
		return events.ApprovalRecord{}, false
	}
	return t.Record, true
}

func (q *Queue) changed() {
	if q.OnChange != nil {
		q.OnChange()
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// newID returns a random approval id.
func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "apr-" + hex.EncodeToString(b[:])
}
