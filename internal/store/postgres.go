package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Log is an incident log: the SQLite file (Store) or PostgreSQL
// (Postgres). Both are safe for concurrent use.
type Log interface {
	Add(ctx context.Context, inc *Incident) (int64, error)
	List(ctx context.Context, f Filter) ([]Incident, error)
	Get(ctx context.Context, id int64) (Incident, error)
	Prune(ctx context.Context) (int64, error)
	// Path names where the log lives: a file, or a URL without password.
	Path() string
	Close() error
}

// IsPostgres reports whether target names a PostgreSQL database
// (postgres:// or postgresql://) rather than a SQLite file.
func IsPostgres(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

// OpenLog opens the incident log that target names: a PostgreSQL URL or
// a SQLite file path.
func OpenLog(ctx context.Context, target string, opts Options) (Log, error) {
	if IsPostgres(target) {
		return OpenPostgres(ctx, target, opts)
	}
	return Open(target, opts)
}

// DefaultBuffer is how many incidents Postgres keeps in memory while the
// database is unreachable.
const DefaultBuffer = 10_000

// ErrOverflow is returned by Postgres.Add when the database is unreachable
// and the in-memory buffer is full: that incident is lost (and counted).
var ErrOverflow = errors.New("incident buffer full while PostgreSQL is unreachable")

// Postgres is the incident log in a PostgreSQL database, shared by any
// number of gateways. Each incident carries a random unique key, so a
// write that is retried after a lost acknowledgement is stored once.
//
// When the database is unreachable, Add keeps incidents in a bounded
// in-memory buffer (Options.Buffer) and a background writer stores them,
// oldest first, once it answers again; incidents that do not fit are
// counted (Overflowed) and logged, never dropped silently.
type Postgres struct {
	pool *pgxpool.Pool
	opts Options
	path string
	log  *slog.Logger

	flushMu  sync.Mutex // one batch in flight, so a batch is removed once
	mu       sync.Mutex
	pending  []Incident
	wake     chan struct{}
	overflow atomic.Uint64
	flushed  atomic.Uint64

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// OpenPostgres connects to the database at rawURL, applies the schema
// migrations (under an advisory lock, so gateways starting together do
// not race) and starts the background writer.
func OpenPostgres(ctx context.Context, rawURL string, opts Options) (*Postgres, error) {
	opts.Clock = clock.Or(opts.Clock)
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store: postgres URL: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > 5*time.Second {
		cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	p := &Postgres{pool: pool, opts: opts, path: redact(rawURL), log: opts.Logger,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if p.log == nil {
		p.log = slog.Default()
	}
	if err := p.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: %s: %w", p.path, err)
	}
	go p.writer()
	return p, nil
}

// redact drops the password from a URL for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres"
	}
	return u.Redacted()
}

// Path returns the database URL without its password.
func (p *Postgres) Path() string { return p.path }

// pgMigrations are applied in order; aegis_schema records which ran.
// Append only: never edit a migration that has shipped.
var pgMigrations = []string{
	`CREATE TABLE incidents (
		id               BIGSERIAL PRIMARY KEY,
		uid              TEXT NOT NULL UNIQUE,
		gateway          TEXT NOT NULL DEFAULT '',
		time_ns          BIGINT NOT NULL,
		kind             TEXT NOT NULL,
		request_id       TEXT NOT NULL,
		route            TEXT NOT NULL DEFAULT '',
		upstream         TEXT NOT NULL DEFAULT '',
		model            TEXT NOT NULL DEFAULT '',
		attempt          INTEGER NOT NULL DEFAULT 0,
		reason           TEXT NOT NULL,
		action           TEXT NOT NULL,
		risk             TEXT NOT NULL,
		findings         JSONB NOT NULL DEFAULT '[]',
		ttft_ns          BIGINT NOT NULL DEFAULT 0,
		verdict_delay_ns BIGINT NOT NULL DEFAULT 0,
		duration_ns      BIGINT NOT NULL DEFAULT 0,
		held_bytes       INTEGER NOT NULL DEFAULT 0,
		tokens           INTEGER NOT NULL DEFAULT 0,
		text             TEXT
	);
	CREATE INDEX incidents_time ON incidents(time_ns);
	CREATE INDEX incidents_reason ON incidents(reason, time_ns);
	CREATE INDEX incidents_gateway ON incidents(gateway, time_ns);`,
	// The fleet's held tool calls (see approvals.go): one row per call,
	// its record (tools, argument paths, hashes; never a value) and stage.
	`CREATE TABLE approvals (
		id             TEXT PRIMARY KEY,
		gateway        TEXT NOT NULL,
		stage          TEXT NOT NULL,
		args_hash      TEXT NOT NULL,
		policy_version TEXT NOT NULL,
		time_ns        BIGINT NOT NULL,
		deadline_ns    BIGINT NOT NULL,
		decided_by     TEXT NOT NULL DEFAULT '',
		decided_ns     BIGINT NOT NULL DEFAULT 0,
		record         JSONB NOT NULL
	);
	CREATE INDEX approvals_stage ON approvals(stage, deadline_ns);
	CREATE INDEX approvals_gateway ON approvals(gateway, stage);`,
}

// migrationLock is the advisory lock key that serialises migrations.
const migrationLock = 0x61656769 // "aegi"

func (p *Postgres) migrate(ctx context.Context) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS aegis_schema (
		version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var version int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM aegis_schema").Scan(&version); err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	if version > len(pgMigrations) {
		return fmt.Errorf("schema version %d is newer than this aegis knows (%d)", version, len(pgMigrations))
	}
	for i := version; i < len(pgMigrations); i++ {
		if _, err := tx.Exec(ctx, pgMigrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO aegis_schema (version) VALUES ($1)", i+1); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

// SchemaVersion returns how many migrations the database has applied.
func (p *Postgres) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := p.pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM aegis_schema").Scan(&v)
	return v, err
}

func newUID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Add stores inc and returns its id. While the database is unreachable (or
// older incidents still wait to be written) inc joins the in-memory buffer
// and Add returns 0 and nil; with the buffer full it returns ErrOverflow.
func (p *Postgres) Add(ctx context.Context, inc *Incident) (int64, error) {
	if inc.Time.IsZero() {
		inc.Time = p.opts.Clock.Now()
	}
	if inc.UID == "" {
		inc.UID = newUID()
	}
	if inc.Gateway == "" {
		inc.Gateway = p.opts.Gateway
	}
	p.mu.Lock()
	queued := len(p.pending) > 0
	p.mu.Unlock()
	if !queued {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		id, err := p.insert(wctx, p.pool, inc)
		cancel()
		if err == nil {
			inc.ID = id
			return id, nil
		}
		p.log.Warn("incident log unreachable; buffering incidents in memory", "db", p.path, "err", err)
	}
	return 0, p.enqueue(*inc)
}

func (p *Postgres) enqueue(inc Incident) error {
	p.mu.Lock()
	if len(p.pending) >= p.opts.Buffer {
		p.mu.Unlock()
		n := p.overflow.Add(1)
		p.log.Error("incident lost: buffer full while the incident log is unreachable",
			"db", p.path, "request_id", inc.RequestID, "reason", string(inc.Reason), "lost_total", n)
		return fmt.Errorf("store: incident %s: %w", inc.RequestID, ErrOverflow)
	}
	p.pending = append(p.pending, inc)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return nil
}

// Buffered returns how many incidents wait in memory for the database.
func (p *Postgres) Buffered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}

// Overflowed returns how many incidents were lost because the buffer was
// full while the database was unreachable.
func (p *Postgres) Overflowed() uint64 { return p.overflow.Load() }

type execer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const pgInsert = `INSERT INTO incidents
	(uid, gateway, time_ns, kind, request_id, route, upstream, model, attempt, reason, action, risk, findings,
	 ttft_ns, verdict_delay_ns, duration_ns, held_bytes, tokens, text)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
	ON CONFLICT (uid) DO UPDATE SET uid = EXCLUDED.uid
	RETURNING id`

func (p *Postgres) insert(ctx context.Context, db execer, inc *Incident) (int64, error) {
	findings := inc.Findings
	if findings == nil {
		findings = []validator.Finding{}
	}
	fj, err := json.Marshal(findings)
	if err != nil {
		return 0, fmt.Errorf("store: encode findings: %w", err)
	}
	var text *string
	if inc.HasText {
		text = &inc.Text
	}
	var id int64
	err = db.QueryRow(ctx, pgInsert, inc.UID, inc.Gateway, inc.Time.UnixNano(), string(inc.Kind), inc.RequestID,
		inc.Route, inc.Upstream, inc.Model, inc.Attempt, string(inc.Reason), string(inc.Action), inc.Risk.String(),
		string(fj), int64(inc.Timings.TTFT), int64(inc.Timings.VerdictDelay), int64(inc.Timings.Duration),
		inc.Timings.HeldBytes, inc.Timings.Tokens, text).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("store: add incident: %w", err)
	}
	return id, nil
}

// writer stores buffered incidents, oldest first, in batches, retrying
// with a growing pause while the database is unreachable.
func (p *Postgres) writer() {
	defer close(p.done)
	const minPause, maxPause = 100 * time.Millisecond, 2 * time.Second
	pause := minPause
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		case <-time.After(pause):
		}
		for {
			n, err := p.flushBatch(context.Background(), 5*time.Second)
			if err != nil {
				pause = min(pause*2, maxPause)
				break
			}
			pause = minPause
			if n == 0 {
				break
			}
		}
	}
}

// flushBatch writes up to 200 buffered incidents in one transaction and
// removes them from the buffer; it returns how many it wrote.
func (p *Postgres) flushBatch(ctx context.Context, timeout time.Duration) (int, error) {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.mu.Lock()
	batch := append([]Incident(nil), p.pending[:min(len(p.pending), 200)]...)
	p.mu.Unlock()
	if len(batch) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		for i := range batch {
			if _, err := p.insert(ctx, tx, &batch[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	p.pending = p.pending[len(batch):]
	if len(p.pending) == 0 {
		p.pending = nil
	}
	p.mu.Unlock()
	n := p.flushed.Add(uint64(len(batch)))
	p.log.Info("buffered incidents written", "db", p.path, "count", len(batch), "flushed_total", n)
	return len(batch), nil
}

// Flush waits until the buffer is written or ctx ends.
func (p *Postgres) Flush(ctx context.Context) error {
	for {
		n, err := p.flushBatch(ctx, 5*time.Second)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
}

// List returns the incidents that match f, newest first.
func (p *Postgres) List(ctx context.Context, f Filter) ([]Incident, error) {
	var args []any
	q := listQuery(pgColumns, f, true, func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) })
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	defer rows.Close()
	return collect(rows, func(r pgx.Rows) (Incident, error) { return scanPG(r) })
}

const pgColumns = `id, time_ns, kind, request_id, route, upstream, model, attempt, reason, action, risk, findings::text,
	ttft_ns, verdict_delay_ns, duration_ns, held_bytes, tokens, text, gateway, uid`

func scanPG(r pgx.Row) (Incident, error) {
	var uid string
	inc, err := scan(extra{r, []any{&uid}})
	inc.UID = uid
	return inc, err
}

// extra appends destinations to a Scan call, for the columns that only
// PostgreSQL has.
type extra struct {
	r    pgx.Row
	more []any
}

func (e extra) Scan(dest ...any) error { return e.r.Scan(append(dest, e.more...)...) }

// Get returns the incident with id, or ErrNotFound.
func (p *Postgres) Get(ctx context.Context, id int64) (Incident, error) {
	inc, err := scanPG(p.pool.QueryRow(ctx, "SELECT "+pgColumns+" FROM incidents WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Incident{}, fmt.Errorf("store: incident %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Incident{}, fmt.Errorf("store: incident %d: %w", id, err)
	}
	return inc, nil
}

// Count returns how many incidents the database holds.
func (p *Postgres) Count(ctx context.Context) (int64, error) {
	var n int64
	err := p.pool.QueryRow(ctx, "SELECT count(*) FROM incidents").Scan(&n)
	return n, err
}

// Prune applies the retention limits and returns how many incidents it
// removed.
func (p *Postgres) Prune(ctx context.Context) (int64, error) {
	var n int64
	if p.opts.MaxAge > 0 {
		cut := p.opts.Clock.Now().Add(-p.opts.MaxAge).UnixNano()
		tag, err := p.pool.Exec(ctx, "DELETE FROM incidents WHERE time_ns < $1", cut)
		if err != nil {
			return n, fmt.Errorf("store: prune by age: %w", err)
		}
		n += tag.RowsAffected()
		// Held calls are kept as long as incidents, once over.
		if _, err := p.pool.Exec(ctx, "DELETE FROM approvals WHERE time_ns < $1 AND stage <> 'proposed'", cut); err != nil {
			return n, fmt.Errorf("store: prune approvals by age: %w", err)
		}
	}
	if p.opts.MaxRows > 0 {
		tag, err := p.pool.Exec(ctx, `DELETE FROM incidents WHERE id <=
			(SELECT id FROM incidents ORDER BY id DESC LIMIT 1 OFFSET $1)`, p.opts.MaxRows)
		if err != nil {
			return n, fmt.Errorf("store: prune by rows: %w", err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}

// Close stops the background writer, tries for a few seconds to write
// what is still buffered, logs (and counts) what could not be written, and
// closes the connections. It is safe to call twice.
func (p *Postgres) Close() error {
	var err error
	p.closeOnce.Do(func() {
		close(p.stop)
		<-p.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if ferr := p.Flush(ctx); ferr != nil {
			n := p.Buffered()
			p.overflow.Add(uint64(n))
			p.log.Error("incidents lost at shutdown: the incident log is unreachable", "db", p.path, "count", n, "err", ferr)
			err = fmt.Errorf("store: %d incidents not written: %w", n, ferr)
		}
		p.pool.Close()
	})
	return err
}
