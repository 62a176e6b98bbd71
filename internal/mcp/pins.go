package mcp

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for a PostgreSQL incident log
	_ "modernc.org/sqlite"             // the "sqlite" driver

	"github.com/aegis-sentinel/aegis/internal/store"
)

// Pin is the first description and input schema a server showed for one
// of its tools, and what it shows now when that differs.
type Pin struct {
	Server      string    `json:"server"`
	Tool        string    `json:"tool"`
	Hash        string    `json:"hash"`
	Description string    `json:"description"`
	Schema      string    `json:"schema"`
	PinnedAt    time.Time `json:"pinned_at"`
	// Changed is set while the server shows something else than the pin:
	// the hash, description and schema it shows now and since when.
	Changed        bool      `json:"changed"`
	NowHash        string    `json:"now_hash,omitempty"`
	NowDescription string    `json:"now_description,omitempty"`
	NowSchema      string    `json:"now_schema,omitempty"`
	ChangedAt      time.Time `json:"changed_at,omitzero"`
}

// ToolHash is the pin's fingerprint of a tool: SHA-256 over its
// description and its input schema in canonical form (keys sorted).
func ToolHash(description, schema string) string {
	h := sha256.New()
	h.Write([]byte(description))
	h.Write([]byte{0})
	h.Write([]byte(schema))
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalJSON re-encodes raw with sorted keys and no spaces, so the same
// schema sent with other spacing or key order pins alike. Invalid JSON is
// kept as it came.
func canonicalJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// Pins keeps tool pins in the incident store's database: the SQLite file
// (or PostgreSQL database) `aegis serve` writes incidents to, in a table of
// its own. It caches the hashes it has seen, so a listing costs no query
// unless a tool is new or changed.
type Pins struct {
	db   *sql.DB
	path string
	now  func() time.Time

	mu    sync.Mutex
	known map[[2]string]string // (server, tool) → the hash last confirmed equal to the pin
}

const pinsSchema = `CREATE TABLE IF NOT EXISTS mcp_pins (
	server TEXT NOT NULL,
	tool TEXT NOT NULL,
	hash TEXT NOT NULL,
	description TEXT NOT NULL,
	schema_json TEXT NOT NULL,
	pinned_at BIGINT NOT NULL,
	now_hash TEXT NOT NULL DEFAULT '',
	now_description TEXT NOT NULL DEFAULT '',
	now_schema TEXT NOT NULL DEFAULT '',
	changed_at BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (server, tool)
)`

// OpenPins opens the pin table in the incident store target names (a
// SQLite path, or a postgres:// URL; empty means store.DefaultPath()),
// creating the table when it is missing.
func OpenPins(ctx context.Context, target string) (*Pins, error) {
	if target == "" {
		target = store.DefaultPath()
	}
	var db *sql.DB
	var err error
	if store.IsPostgres(target) {
		db, err = sql.Open("pgx", target)
	} else {
		if dir := filepath.Dir(target); dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("pins: %w", err)
			}
		}
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(5000)")
		q.Add("_pragma", "journal_mode(WAL)")
		db, err = sql.Open("sqlite", target+"?"+q.Encode())
	}
	if err != nil {
		return nil, fmt.Errorf("pins: open %s: %w", redactURL(target), err)
	}
	if _, err := db.ExecContext(ctx, pinsSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("pins: %s: %w", redactURL(target), err)
	}
	return &Pins{db: db, path: target, now: time.Now, known: map[[2]string]string{}}, nil
}

func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// Close closes the database.
func (p *Pins) Close() error { return p.db.Close() }

// Check compares what a server shows for a tool with its pin: the first
// sighting becomes the pin; a different one is recorded as the change
// and reported with the pin it differs from.
func (p *Pins) Check(ctx context.Context, server, tool, description, schema string) (Pin, bool, error) {
	hash := ToolHash(description, schema)
	key := [2]string{server, tool}
	p.mu.Lock()
	ok := p.known[key] == hash
	p.mu.Unlock()
	if ok {
		return Pin{Server: server, Tool: tool, Hash: hash}, false, nil
	}
	now := p.now().UnixNano()
	if _, err := p.db.ExecContext(ctx, `INSERT INTO mcp_pins (server, tool, hash, description, schema_json, pinned_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (server, tool) DO NOTHING`, server, tool, hash, description, schema, now); err != nil {
		return Pin{}, false, fmt.Errorf("pins: %w", err)
	}
	pin, err := p.get(ctx, server, tool)
	if err != nil {
		return Pin{}, false, err
	}
	if pin.Hash == hash {
		if pin.Changed { // it went back to the pinned tool
			if _, err := p.db.ExecContext(ctx, `UPDATE mcp_pins SET now_hash = '', now_description = '', now_schema = '', changed_at = 0
				WHERE server = $1 AND tool = $2`, server, tool); err != nil {
				return Pin{}, false, fmt.Errorf("pins: %w", err)
			}
		}
		p.mu.Lock()
		p.known[key] = hash
		p.mu.Unlock()
		return pin, false, nil
	}
	if pin.NowHash != hash {
		if _, err := p.db.ExecContext(ctx, `UPDATE mcp_pins SET now_hash = $3, now_description = $4, now_schema = $5, changed_at = $6
			WHERE server = $1 AND tool = $2`, server, tool, hash, description, schema, now); err != nil {
			return Pin{}, false, fmt.Errorf("pins: %w", err)
		}
		pin.NowHash, pin.NowDescription, pin.NowSchema, pin.ChangedAt, pin.Changed = hash, description, schema, time.Unix(0, now), true
	}
	return pin, true, nil
}

func (p *Pins) get(ctx context.Context, server, tool string) (Pin, error) {
	pins, err := p.query(ctx, `WHERE server = $1 AND tool = $2`, server, tool)
	if err != nil {
		return Pin{}, err
	}
	if len(pins) == 0 {
		return Pin{}, fmt.Errorf("pins: no pin for %s/%s", server, tool)
	}
	return pins[0], nil
}

func (p *Pins) query(ctx context.Context, where string, args ...any) ([]Pin, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT server, tool, hash, description, schema_json, pinned_at, now_hash, now_description, now_schema, changed_at
		FROM mcp_pins `+where+` ORDER BY server, tool`, args...)
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	defer rows.Close()
	var out []Pin
	for rows.Next() {
		var pin Pin
		var pinned, changed int64
		if err := rows.Scan(&pin.Server, &pin.Tool, &pin.Hash, &pin.Description, &pin.Schema, &pinned,
			&pin.NowHash, &pin.NowDescription, &pin.NowSchema, &changed); err != nil {
			return nil, fmt.Errorf("pins: %w", err)
		}
		pin.PinnedAt = time.Unix(0, pinned)
		if pin.NowHash != "" {
			pin.Changed, pin.ChangedAt = true, time.Unix(0, changed)
		}
		out = append(out, pin)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	return out, nil
}

// List returns the pins of server (every server when empty), changed ones
// only when changedOnly.
func (p *Pins) List(ctx context.Context, server string, changedOnly bool) ([]Pin, error) {
	where, args := "WHERE 1=1", []any{}
	if server != "" {
		where += " AND server = $1"
		args = append(args, server)
	}
	if changedOnly {
		where += " AND now_hash <> ''"
	}
	return p.query(ctx, where, args...)
}

// ErrNoChange is returned by Approve for a tool that shows no change.
var ErrNoChange = errors.New("the tool has not changed since it was pinned")

// Approve makes what a tool shows now its pin. tool empty approves every
// changed tool of server. It returns the approved pins.
func (p *Pins) Approve(ctx context.Context, server, tool string) ([]Pin, error) {
	where, args := "WHERE server = $1 AND now_hash <> ''", []any{server}
	if tool != "" {
		where += " AND tool = $2"
		args = append(args, tool)
	}
	pins, err := p.query(ctx, where, args...)
	if err != nil {
		return nil, err
	}
	if len(pins) == 0 {
		if tool != "" {
			if _, err := p.get(ctx, server, tool); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("pins: %s/%s: %w", server, tool, ErrNoChange)
		}
		return nil, nil
	}
	now := p.now().UnixNano()
	for i, pin := range pins {
		if _, err := p.db.ExecContext(ctx, `UPDATE mcp_pins SET hash = now_hash, description = now_description, schema_json = now_schema,
			pinned_at = $3, now_hash = '', now_description = '', now_schema = '', changed_at = 0
			WHERE server = $1 AND tool = $2 AND now_hash = $4`, pin.Server, pin.Tool, now, pin.NowHash); err != nil {
			return nil, fmt.Errorf("pins: %w", err)
		}
		pins[i] = Pin{Server: pin.Server, Tool: pin.Tool, Hash: pin.NowHash, Description: pin.NowDescription, Schema: pin.NowSchema, PinnedAt: time.Unix(0, now)}
	}
	p.mu.Lock()
	for _, pin := range pins {
		delete(p.known, [2]string{pin.Server, pin.Tool})
	}
	p.mu.Unlock()
	return pins, nil
}
