package approval

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
)

// More errors a Desk returns; the API answers ErrDecided with 409 and
// ErrUnavailable with 503.
var (
	ErrDecided     = errors.New("the call was already decided: the first decision stands")
	ErrUnavailable = errors.New("the fleet's shared approval store is unreachable")
)

// Desk is where a person decides: the held calls one can list, look up
// and approve or deny. A Queue's Desk (Queue.Desk) shows its own
// gateway's calls; a fleet's (fleet.Approvals) shows every gateway's and
// sends a decision to the gateway that holds the call.
type Desk interface {
	// Pending returns the held calls, oldest first.
	Pending(ctx context.Context) ([]events.ApprovalRecord, error)
	// Lookup returns the held call id (ErrNotFound when it is not held).
	Lookup(ctx context.Context, id string) (events.ApprovalRecord, error)
	// Decide answers the held call id as Queue.Decide does.
	Decide(ctx context.Context, id string, d Decision) (events.ApprovalRecord, error)
}

// Desk returns the queue's own desk.
func (q *Queue) Desk() Desk { return localDesk{q} }

type localDesk struct{ q *Queue }

func (l localDesk) Pending(context.Context) ([]events.ApprovalRecord, error) {
	return l.q.Pending(), nil
}

func (l localDesk) Lookup(_ context.Context, id string) (events.ApprovalRecord, error) {
	if r, ok := l.q.Get(id); ok {
		return r, nil
	}
	return events.ApprovalRecord{}, ErrNotFound
}

func (l localDesk) Decide(_ context.Context, id string, d Decision) (events.ApprovalRecord, error) {
	return l.q.Decide(id, d)
}

// Shared is the store of held calls that a fleet's gateways share (the
// PostgreSQL incident store implements it: store.Postgres.Approvals). It
// holds records, never argument values. Every method is atomic.
type Shared interface {
	// Put records r, held by gateway, at r's stage. A proposed record is
	// added unless the call is known (a decision already taken stays);
	// any other stage is what the holding gateway did with the call and
	// replaces a proposed or approved one.
	Put(ctx context.Context, gateway string, r events.ApprovalRecord) error
	// Pending returns the proposed calls of every gateway whose deadline
	// is after now, oldest first.
	Pending(ctx context.Context, now time.Time) ([]events.ApprovalRecord, error)
	// Lookup returns the call id at whatever stage, or ErrNotFound.
	Lookup(ctx context.Context, id string) (events.ApprovalRecord, error)
	// Decide records d on the proposed call id at time at, atomically:
	// the first decision wins (later ones get ErrDecided). An approval
	// must name the call's args_hash and policy_version (ErrUnbound,
	// ErrOtherArgs, ErrOtherPolicy: the call stays proposed); a call past
	// its deadline or never shared answers ErrNotFound.
	Decide(ctx context.Context, id string, d Decision, at time.Time) (events.ApprovalRecord, error)
	// Decided returns the calls among ids that are no longer proposed.
	Decided(ctx context.Context, ids []string) ([]events.ApprovalRecord, error)
	// Abandon cancels the calls gateway still has proposed or approved:
	// it restarted, so their clients are gone. It returns how many.
	Abandon(ctx context.Context, gateway string, at time.Time) (int64, error)
}

// IsRefusal reports whether err is an answer about the call (not found,
// decided, unbound, other arguments or policy) rather than a failure to
// reach where the call is kept.
func IsRefusal(err error) bool {
	for _, e := range []error{ErrNotFound, ErrDecided, ErrUnbound, ErrOtherArgs, ErrOtherPolicy, ErrPolicyChanged} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Status is the HTTP status the approvals API and the dashboard answer a
// Desk's error with.
func Status(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrUnbound):
		return http.StatusBadRequest
	case IsRefusal(err):
		return http.StatusConflict
	}
	return http.StatusServiceUnavailable
}
