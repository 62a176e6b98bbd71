package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-sentinel/aegis/internal/approval"
	"github.com/aegis-sentinel/aegis/internal/events"
)

// PGApprovals is the fleet's held tool calls in the PostgreSQL incident
// log (table approvals): every gateway of the fleet lists them and
// decides on them; the gateway that holds a call reads the decision
// back. A row keeps the record (tools, argument paths, hashes, rule) and
// its stage, never an argument value.
type PGApprovals struct{ p *Postgres }

// Approvals returns the log's shared approvals.
func (p *Postgres) Approvals() *PGApprovals { return &PGApprovals{p} }

var _ approval.Shared = (*PGApprovals)(nil)

// The stages a gateway may still change: after them the call is over.
const openStages = `('proposed', 'approved')`

// Put records r held by gateway (see approval.Shared).
func (a *PGApprovals) Put(ctx context.Context, gateway string, r events.ApprovalRecord) error {
	if r.ID == "" {
		return errors.New("store: approval record without an id")
	}
	stage, by := r.Stage, r.By
	r.Stage, r.By, r.Gateway = approval.Proposed.String(), "", ""
	rec, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: encode approval %s: %w", r.ID, err)
	}
	q := `INSERT INTO approvals (id, gateway, stage, args_hash, policy_version, time_ns, deadline_ns, decided_by, decided_ns, record)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
	var decided int64
	if stage == approval.Proposed.String() {
		q += ` ON CONFLICT (id) DO NOTHING`
	} else {
		decided = a.p.opts.Clock.Now().UnixNano()
		q += ` ON CONFLICT (id) DO UPDATE SET stage = EXCLUDED.stage, decided_ns = EXCLUDED.decided_ns,
			decided_by = CASE WHEN EXCLUDED.decided_by <> '' THEN EXCLUDED.decided_by ELSE approvals.decided_by END
			WHERE approvals.stage IN ` + openStages
	}
	_, err = a.p.pool.Exec(ctx, q, r.ID, gateway, stage, r.ArgsHash, r.PolicyVersion, r.Time.UnixNano(), r.Deadline.UnixNano(),
		by, decided, string(rec))
	if err != nil {
		return fmt.Errorf("store: approval %s: %w", r.ID, err)
	}
	return nil
}

const approvalColumns = `record::text, gateway, stage, decided_by`

func scanApproval(row pgx.Row) (events.ApprovalRecord, error) {
	var raw string
	var r events.ApprovalRecord
	var gateway, stage, by string
	if err := row.Scan(&raw, &gateway, &stage, &by); err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return r, fmt.Errorf("approval record: %w", err)
	}
	r.Gateway, r.Stage, r.By = gateway, stage, by
	return r, nil
}

func (a *PGApprovals) list(ctx context.Context, q string, args ...any) ([]events.ApprovalRecord, error) {
	rows, err := a.p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []events.ApprovalRecord{}
	for rows.Next() {
		r, err := scanApproval(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// maxPending bounds the held calls one listing returns.
const maxPending = 1000

// Pending returns every gateway's proposed calls whose deadline is after
// now, oldest first.
func (a *PGApprovals) Pending(ctx context.Context, now time.Time) ([]events.ApprovalRecord, error) {
	out, err := a.list(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE stage = 'proposed' AND deadline_ns > $1
		ORDER BY time_ns, id LIMIT $2`, now.UnixNano(), maxPending)
	if err != nil {
		return nil, fmt.Errorf("store: pending approvals: %w", err)
	}
	return out, nil
}

// Lookup returns the call id at whatever stage.
func (a *PGApprovals) Lookup(ctx context.Context, id string) (events.ApprovalRecord, error) {
	r, err := scanApproval(a.p.pool.QueryRow(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, approval.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("store: approval %s: %w", id, err)
	}
	return r, nil
}

// Decide records d on the proposed call id, first decision wins (see
// approval.Shared).
func (a *PGApprovals) Decide(ctx context.Context, id string, d approval.Decision, at time.Time) (events.ApprovalRecord, error) {
	if d.Approve && (d.ArgsHash == "" || d.PolicyVersion == "") {
		return events.ApprovalRecord{}, approval.ErrUnbound
	}
	stage := approval.Denied.String()
	if d.Approve {
		stage = approval.Approved.String()
	}
	// One statement: of two gateways deciding at once, one updates the
	// proposed row and the other finds it decided.
	r, err := scanApproval(a.p.pool.QueryRow(ctx, `UPDATE approvals SET stage = $2, decided_by = $3, decided_ns = $4
		WHERE id = $1 AND stage = 'proposed' AND deadline_ns > $4
		  AND (NOT $5 OR (args_hash = $6 AND policy_version = $7))
		RETURNING `+approvalColumns, id, stage, d.By, at.UnixNano(), d.Approve, d.ArgsHash, d.PolicyVersion))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("store: decide approval %s: %w", id, err)
	}
	// Nothing changed: say why.
	var cur struct {
		stage, hash, version, by string
		deadline                 int64
	}
	err = a.p.pool.QueryRow(ctx, `SELECT stage, args_hash, policy_version, decided_by, deadline_ns FROM approvals WHERE id = $1`, id).
		Scan(&cur.stage, &cur.hash, &cur.version, &cur.by, &cur.deadline)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return events.ApprovalRecord{}, approval.ErrNotFound
	case err != nil:
		return events.ApprovalRecord{}, fmt.Errorf("store: decide approval %s: %w", id, err)
	case cur.stage != approval.Proposed.String():
		return events.ApprovalRecord{}, fmt.Errorf("%w (%s%s)", approval.ErrDecided, cur.stage, byWhom(cur.by))
	case cur.deadline <= at.UnixNano():
		return events.ApprovalRecord{}, fmt.Errorf("%w: its deadline passed", approval.ErrNotFound)
	case cur.hash != d.ArgsHash:
		return events.ApprovalRecord{}, approval.ErrOtherArgs
	default:
		return events.ApprovalRecord{}, approval.ErrOtherPolicy
	}
}

func byWhom(by string) string {
	if by == "" {
		return ""
	}
	return " by " + by
}

// Decided returns the calls among ids that are no longer proposed.
func (a *PGApprovals) Decided(ctx context.Context, ids []string) ([]events.ApprovalRecord, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := a.list(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = ANY($1) AND stage <> 'proposed'`, ids)
	if err != nil {
		return nil, fmt.Errorf("store: decided approvals: %w", err)
	}
	return out, nil
}

// Abandon cancels the calls gateway still has open (it restarted).
func (a *PGApprovals) Abandon(ctx context.Context, gateway string, at time.Time) (int64, error) {
	tag, err := a.p.pool.Exec(ctx, `UPDATE approvals SET stage = 'cancelled', decided_by = 'gateway restart', decided_ns = $2
		WHERE gateway = $1 AND stage IN `+openStages, gateway, at.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("store: abandon approvals of %s: %w", gateway, err)
	}
	return tag.RowsAffected(), nil
}
