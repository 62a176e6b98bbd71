// Package store keeps the incident log: every hidden retry and every halt
// the gateway decides, with the request it belongs to, the verdict and its
// findings (byte offsets into the output), timings and, only when the
// configuration allows logging outputs, the offending text.
//
// On one PC the log is one SQLite file opened through the pure-Go driver
// modernc.org/sqlite (no cgo), in WAL journal mode with synchronous=NORMAL:
// a committed incident survives a crash of the process that wrote it, and
// readers (`aegis incidents`, the dashboard) never block the writer. The
// schema is migrated on Open, and a retention limit (rows and/or age)
// keeps the file bounded. Several gateways share one log in PostgreSQL
// instead (OpenLog with a postgres:// URL, see Postgres); both implement
// Log.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/validator"

	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go)
)

// ErrNotFound is returned by Get for an id that is not in the log.
var ErrNotFound = errors.New("incident not found")

// Kind says whether an incident was a hidden retry, a halt, a block (the
// input refused before generation), a redaction (an MCP tool result
// forwarded with its secrets replaced), or a warning (a finding recorded
// and what it was about let through, as an MCP policy of "warn" does).
type Kind string

// The incident kinds.
const (
	KindRetry  Kind = "retry"
	KindHalt   Kind = "halt"
	KindBlock  Kind = "block"
	KindRedact Kind = "redact"
	KindWarn   Kind = "warn"
)

func (k Kind) String() string { return string(k) }

// Timings are what the gateway measured for the attempt that failed. Zero
// means not measured.
type Timings struct {
	TTFT         time.Duration `json:"ttft_ns,omitempty"`
	VerdictDelay time.Duration `json:"verdict_delay_ns,omitempty"`
	Duration     time.Duration `json:"duration_ns,omitempty"`
	HeldBytes    int           `json:"held_bytes,omitempty"`
	Tokens       int           `json:"tokens,omitempty"`
}

// Incident is one stored retry or halt.
type Incident struct {
	ID int64 `json:"id"`
	// UID is a random key set when the incident is first written to
	// PostgreSQL, so a retried write is stored once (the SQLite log keeps
	// none); Gateway names the gateway that recorded it.
	UID       string    `json:"uid,omitempty"`
	Gateway   string    `json:"gateway,omitempty"`
	Time      time.Time `json:"time"`
	Kind      Kind      `json:"kind"`
	RequestID string    `json:"request_id"`
	Route     string    `json:"route,omitempty"`
	Upstream  string    `json:"upstream,omitempty"`
	Model     string    `json:"model,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`

	Reason   validator.Reason    `json:"reason"`
	Action   validator.Action    `json:"action"`
	Risk     validator.Risk      `json:"risk"`
	Findings []validator.Finding `json:"findings"`
	Timings  Timings             `json:"timings"`

	// Text is the attempt's output when the configuration allowed logging
	// it; HasText tells an empty output from one that was not recorded.
	Text    string `json:"text,omitempty"`
	HasText bool   `json:"has_text"`
}

// Options tune a Store. The zero value keeps everything forever.
type Options struct {
	// MaxRows keeps at most this many incidents (the newest); 0 means no
	// limit.
	MaxRows int
	// MaxAge drops incidents older than this; 0 means no limit.
	MaxAge time.Duration
	// Clock is the clock used for retention; nil means the wall clock.
	Clock clock.Clock

	// Gateway is written with every incident. PostgreSQL only: Buffer
	// bounds the incidents kept in memory while the database is
	// unreachable (0 means DefaultBuffer); Logger receives buffering and
	// loss messages (nil means slog.Default()).
	Gateway string
	Buffer  int
	Logger  *slog.Logger
}

// Store is an open incident log. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
	opts Options

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the incident log at path and migrates
// its schema to the current version.
func Open(path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("store: empty path")
	}
	opts.Clock = clock.Or(opts.Clock)
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := &Store{db: db, path: path, opts: opts}
	if err := s.migrate(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	return s, nil
}

// Path returns the file the log lives in.
func (s *Store) Path() string { return s.path }

// Close closes the database. It is safe to call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.db.Close() })
	return s.closeErr
}

// migrations are applied in order; PRAGMA user_version records how many
// have run. Append only: never edit a migration that has shipped.
var migrations = []string{
	`CREATE TABLE incidents (
		id               INTEGER PRIMARY KEY AUTOINCREMENT,
		time_ns          INTEGER NOT NULL,
		kind             TEXT NOT NULL,
		request_id       TEXT NOT NULL,
		route            TEXT NOT NULL DEFAULT '',
		upstream         TEXT NOT NULL DEFAULT '',
		model            TEXT NOT NULL DEFAULT '',
		attempt          INTEGER NOT NULL DEFAULT 0,
		reason           TEXT NOT NULL,
		action           TEXT NOT NULL,
		risk             TEXT NOT NULL,
		findings         TEXT NOT NULL DEFAULT '[]',
		ttft_ns          INTEGER NOT NULL DEFAULT 0,
		verdict_delay_ns INTEGER NOT NULL DEFAULT 0,
		duration_ns      INTEGER NOT NULL DEFAULT 0,
		held_bytes       INTEGER NOT NULL DEFAULT 0,
		tokens           INTEGER NOT NULL DEFAULT 0,
		text             TEXT
	);
	CREATE INDEX incidents_time ON incidents(time_ns);
	CREATE INDEX incidents_reason ON incidents(reason, time_ns);`,
	// Several local gateways may share one file (the default path): each
	// incident names the gateway that recorded it.
	`ALTER TABLE incidents ADD COLUMN gateway TEXT NOT NULL DEFAULT '';
	CREATE INDEX incidents_gateway ON incidents(gateway, time_ns);`,
}

func (s *Store) migrate(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Up to date: no write lock needed, so a reader (aegis incidents)
	// never waits on, or blocks, a running server.
	var current int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	if current == len(migrations) {
		return nil
	}
	// BEGIN IMMEDIATE takes the write lock first, so two processes opening
	// a new file at once do not both run the first migration.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	commit := false
	defer func() {
		if !commit {
			conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	var version int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this aegis knows (%d)", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		if _, err := conn.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		return fmt.Errorf("migrate: set version: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	commit = true
	return nil
}

// Add stores inc and returns its id. A zero Time is set to now.
func (s *Store) Add(ctx context.Context, inc *Incident) (int64, error) {
	if inc.Time.IsZero() {
		inc.Time = s.opts.Clock.Now()
	}
	findings := inc.Findings
	if findings == nil {
		findings = []validator.Finding{}
	}
	fj, err := json.Marshal(findings)
	if err != nil {
		return 0, fmt.Errorf("store: encode findings: %w", err)
	}
	var text any
	if inc.HasText {
		text = inc.Text
	}
	if inc.Gateway == "" {
		inc.Gateway = s.opts.Gateway
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO incidents
		(time_ns, kind, request_id, route, upstream, model, attempt, reason, action, risk, findings,
		 ttft_ns, verdict_delay_ns, duration_ns, held_bytes, tokens, text, gateway)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		inc.Time.UnixNano(), string(inc.Kind), inc.RequestID, inc.Route, inc.Upstream, inc.Model, inc.Attempt,
		string(inc.Reason), string(inc.Action), inc.Risk.String(), string(fj),
		int64(inc.Timings.TTFT), int64(inc.Timings.VerdictDelay), int64(inc.Timings.Duration),
		inc.Timings.HeldBytes, inc.Timings.Tokens, text, inc.Gateway)
	if err != nil {
		return 0, fmt.Errorf("store: add incident: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("store: add incident: %w", err)
	}
	inc.ID = id
	return id, nil
}

// Filter selects incidents for List. Zero fields do not filter.
type Filter struct {
	Since  time.Time        // only incidents at or after this time
	Reason validator.Reason // only this reason
	Kind   Kind             // only retries or only halts
	// Gateway keeps only one gateway's incidents (several may share one
	// log: PostgreSQL, or local gateways on the default SQLite path).
	Gateway string
	Limit   int // at most this many (the newest); 0 means 100
}

const columns = `id, time_ns, kind, request_id, route, upstream, model, attempt, reason, action, risk, findings,
	ttft_ns, verdict_delay_ns, duration_ns, held_bytes, tokens, text, gateway`

// List returns the incidents that match f, newest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Incident, error) {
	var args []any
	q := listQuery(columns, f, true, func(v any) string { args = append(args, v); return "?" })
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	defer rows.Close()
	return collect(rows, func(r *sql.Rows) (Incident, error) { return scan(r) })
}

// listQuery is List's query over columns for f, newest first; param
// adds an argument and returns its placeholder. Only a store with a
// gateway column filters by gateway.
func listQuery(columns string, f Filter, byGateway bool, param func(any) string) string {
	var where []string
	if !f.Since.IsZero() {
		where = append(where, "time_ns >= "+param(f.Since.UnixNano()))
	}
	if f.Reason != validator.ReasonNone {
		where = append(where, "reason = "+param(string(f.Reason)))
	}
	if f.Kind != "" {
		where = append(where, "kind = "+param(string(f.Kind)))
	}
	if byGateway && f.Gateway != "" {
		where = append(where, "gateway = "+param(f.Gateway))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q := "SELECT " + columns + " FROM incidents"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY id DESC LIMIT " + param(limit)
}

// collect reads every incident of rows with scan.
func collect[R interface {
	Next() bool
	Err() error
}](rows R, scan func(R) (Incident, error)) ([]Incident, error) {
	var out []Incident
	for rows.Next() {
		inc, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list: %w", err)
		}
		out = append(out, inc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	return out, nil
}

// Get returns the incident with id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (Incident, error) {
	row := s.db.QueryRowContext(ctx, "SELECT "+columns+" FROM incidents WHERE id = ?", id)
	inc, err := scan(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Incident{}, fmt.Errorf("store: incident %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Incident{}, fmt.Errorf("store: incident %d: %w", id, err)
	}
	return inc, nil
}

type scanner interface{ Scan(dest ...any) error }

func scan(r scanner) (Incident, error) {
	var (
		inc                        Incident
		timeNS, ttft, delay, dur   int64
		kind, reason, action, risk string
		findings                   string
		text                       sql.NullString
	)
	err := r.Scan(&inc.ID, &timeNS, &kind, &inc.RequestID, &inc.Route, &inc.Upstream, &inc.Model, &inc.Attempt,
		&reason, &action, &risk, &findings, &ttft, &delay, &dur, &inc.Timings.HeldBytes, &inc.Timings.Tokens, &text, &inc.Gateway)
	if err != nil {
		return Incident{}, err
	}
	inc.Time = time.Unix(0, timeNS)
	inc.Kind = Kind(kind)
	inc.Reason = validator.Reason(reason)
	inc.Action = validator.Action(action)
	if inc.Risk, err = validator.ParseRisk(risk); err != nil {
		return Incident{}, fmt.Errorf("incident %d: %w", inc.ID, err)
	}
	if err := json.Unmarshal([]byte(findings), &inc.Findings); err != nil {
		return Incident{}, fmt.Errorf("incident %d: findings: %w", inc.ID, err)
	}
	inc.Timings.TTFT = time.Duration(ttft)
	inc.Timings.VerdictDelay = time.Duration(delay)
	inc.Timings.Duration = time.Duration(dur)
	inc.Text, inc.HasText = text.String, text.Valid
	return inc, nil
}

// Prune applies the retention limits and returns how many incidents it
// removed.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	var n int64
	if s.opts.MaxAge > 0 {
		cut := s.opts.Clock.Now().Add(-s.opts.MaxAge).UnixNano()
		res, err := s.db.ExecContext(ctx, "DELETE FROM incidents WHERE time_ns < ?", cut)
		if err != nil {
			return n, fmt.Errorf("store: prune by age: %w", err)
		}
		d, _ := res.RowsAffected()
		n += d
	}
	if s.opts.MaxRows > 0 {
		res, err := s.db.ExecContext(ctx, `DELETE FROM incidents WHERE id <=
			(SELECT id FROM incidents ORDER BY id DESC LIMIT 1 OFFSET ?)`, s.opts.MaxRows)
		if err != nil {
			return n, fmt.Errorf("store: prune by rows: %w", err)
		}
		d, _ := res.RowsAffected()
		n += d
	}
	return n, nil
}

// IntegrityCheck runs SQLite's integrity check and returns nil when it
// answers "ok".
func (s *Store) IntegrityCheck(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return fmt.Errorf("store: integrity check: %w", err)
	}
	defer rows.Close()
	var msgs []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return fmt.Errorf("store: integrity check: %w", err)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: integrity check: %w", err)
	}
	if len(msgs) == 1 && msgs[0] == "ok" {
		return nil
	}
	return fmt.Errorf("store: integrity check: %s", strings.Join(msgs, "; "))
}

// JournalMode returns SQLite's journal mode for the open database ("wal").
func (s *Store) JournalMode(ctx context.Context) (string, error) {
	var m string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&m); err != nil {
		return "", fmt.Errorf("store: journal mode: %w", err)
	}
	return m, nil
}

// DefaultPath is where the incident log lives unless the configuration or
// a flag names another file: $AEGIS_INCIDENTS if set, else
// $XDG_STATE_HOME/aegis/incidents.db (default ~/.local/state/aegis), so
// `aegis serve` and `aegis incidents` find the same file from any working
// directory. Without a home directory it falls back to
// ./aegis-incidents.db.
func DefaultPath() string {
	if p := os.Getenv("AEGIS_INCIDENTS"); p != "" {
		return p
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "aegis", "incidents.db")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".local", "state", "aegis", "incidents.db")
	}
	return "aegis-incidents.db"
}
