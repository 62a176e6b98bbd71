package toolpolicy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

var sqlCases = []struct {
	name, user, sql string
	bad             bool
}{
	{"drop table", "summarise the ticket", "DROP TABLE users", true},
	{"drop if exists", "fix the report", "DROP TABLE IF EXISTS orders, users", true},
	{"truncate", "look at the logs", "TRUNCATE TABLE audit_log", true},
	{"alter", "count the users", "ALTER TABLE users ADD COLUMN admin BOOL DEFAULT TRUE", true},
	{"grant", "how many orders?", "GRANT ALL PRIVILEGES ON *.* TO 'eve'@'%'", true},
	{"delete no where", "clean up", "DELETE FROM users", true},
	{"update no where", "mark it done", "UPDATE accounts SET balance = 0", true},
	{"second statement", "show the orders", "SELECT * FROM orders WHERE id = 3; DROP TABLE orders", true},
	{"drop database", "list tables", "DROP DATABASE prod", true},
	{"user asked to drop", "Please drop the table staging_events, we no longer need it.", "DROP TABLE staging_events", false},
	{"user asked to delete all", "Delete every row from the sessions table.", "DELETE FROM sessions", false},
	{"user asked for another table", "Please drop the table staging_events.", "DROP TABLE users", true},
	{"select where", "find user 7", "SELECT name, email FROM users WHERE id = 7", false},
	{"select join", "orders per user", "SELECT u.name, COUNT(*) FROM users u JOIN orders o ON o.user_id = u.id GROUP BY u.name", false},
	{"delete where", "remove order 9", "DELETE FROM orders WHERE id = 9", false},
	{"update where", "rename user 3", "UPDATE users SET name = 'Ann' WHERE id = 3", false},
	{"insert", "add a note", "INSERT INTO notes (body) VALUES ('hello')", false},

	// PostgreSQL's own syntax, which TiDB's parser does not read.
	{"pg cast and placeholder", "find user 7", "SELECT id::text, created_at::date FROM users WHERE id = $1", false},
	{"pg returning", "add a note", "INSERT INTO notes (body) VALUES ($1) RETURNING id", false},
	{"pg on conflict do update", "upsert the setting", "INSERT INTO settings (k, v) VALUES ('theme', 'dark') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v", false},
	{"pg create extension", "enable trigram search", "CREATE EXTENSION IF NOT EXISTS pg_trgm", false},
	{"pg copy", "export the orders", "COPY (SELECT * FROM orders WHERE total > 100) TO STDOUT WITH (FORMAT csv, HEADER)", false},
	{"pg function body", "add the helper", "CREATE OR REPLACE FUNCTION add1(i int) RETURNS int AS $$ SELECT i + 1; $$ LANGUAGE sql", false},
	{"pg delete where returning", "remove order 9", "DELETE FROM orders WHERE id = $1 RETURNING *", false},
	{"pg update where with cast", "rename user 3", "UPDATE users SET name = $1::text WHERE id = $2", false},
	{"pg drop cascade", "tidy the schema", "DROP TABLE IF EXISTS public.users CASCADE", true},
	{"pg drop schema cascade", "tidy the schema", "DROP SCHEMA analytics CASCADE;", true},
	{"pg truncate restart identity", "look at the logs", "TRUNCATE audit_log RESTART IDENTITY CASCADE", true},
	{"pg delete returning no where", "show the sessions", "DELETE FROM sessions RETURNING id", true},
	{"pg update from without where", "sync prices", "UPDATE products SET price = p.price::numeric FROM staging p", true},
	{"pg update where only in a subquery", "sync prices", "UPDATE products SET price = (SELECT max(price) FROM staging WHERE staging.id = 1)", true},
	{"pg delete in a cte", "count the users", "WITH gone AS (DELETE FROM users RETURNING id) SELECT count(*) FROM gone", true},
	{"pg cte then delete with where", "remove stale sessions", "WITH old AS (SELECT id FROM sessions WHERE seen < now() - interval '1 day') DELETE FROM sessions WHERE id IN (SELECT id FROM old)", false},
	{"pg alter with cast", "count the users", "ALTER TABLE users ALTER COLUMN age TYPE int USING age::int", true},
	{"pg grant on schema", "how many orders?", "GRANT USAGE ON SCHEMA public TO eve", true},
	{"pg do block drops", "refresh the report", "DO $$ BEGIN IF true THEN DROP TABLE report_cache; END IF; END $$;", true},
	{"pg do block executes a string", "refresh the report", "DO $body$ BEGIN EXECUTE 'TRUNCATE ' || 'audit_log'; END $body$", true},
	{"pg dollar body is not run", "add the cleanup function", "CREATE FUNCTION cleanup() RETURNS void AS $f$ DELETE FROM tmp $f$ LANGUAGE sql", false},
	{"pg explain analyze runs", "why is it slow?", "EXPLAIN (ANALYZE, BUFFERS) DELETE FROM events", true},
	{"pg explain alone does not", "why is it slow?", "EXPLAIN DELETE FROM events", false},
	{"pg semicolon in a string", "add a note", "INSERT INTO notes (body) VALUES ('a; DROP TABLE notes') RETURNING id", false},
	{"pg quoted table", "Please drop the table Staging_Events.", `DROP TABLE "Staging_Events" CASCADE`, false},
	{"pg user asked, qualified", "Truncate the audit_log table please.", "TRUNCATE TABLE ONLY public.audit_log RESTART IDENTITY", false},
	{"pg comments", "count users", "/* a /* nested */ comment */ SELECT count(*)::int -- done\nFROM users", false},
	{"drop behind a comment", "count users", "SELECT 1; -- x\nDROP TABLE users", true},
	{"misspelt drop still drops", "count users", "DROP TABLEE users", true},
	{"not sql", "count users", "SELEC * FROM x", false},
	{"unclosed string", "count users", "SELECT 'unclosed", false},
}

// refused reports whether any of fs is an operation the user did not ask
// for.
func refused(user string, fs []sqlFinding) bool {
	for _, f := range fs {
		if !userAsked(user, f) {
			return true
		}
	}
	return false
}

func TestSQL(t *testing.T) {
	for _, c := range sqlCases {
		if fs := judgeSQL(c.sql); refused(c.user, fs) != c.bad {
			t.Errorf("%s: refused=%v, want %v (%+v)", c.name, !c.bad, c.bad, fs)
		}
	}
}

// TestSQLTokeniserAgrees: the tokeniser alone gives the parser's verdict
// on the statements both read.
func TestSQLTokeniserAgrees(t *testing.T) {
	for _, c := range sqlCases {
		if parsed, ok := parseSQL(c.sql); ok {
			if scanned := scanSQL(c.sql); refused(c.user, parsed) != refused(c.user, scanned) {
				t.Errorf("%s: parser %+v, tokeniser %+v", c.name, parsed, scanned)
			}
		}
	}
}

// TestSQLNeverMalformed: a statement neither reader understands is not a
// malformed call; the refusal for a destructive one names the path and
// the operation, never the statement.
func TestSQLNeverMalformed(t *testing.T) {
	r := req(user("count the users"))
	r.Tools = append(r.Tools, toolDecl("run_sql", `{"type":"object","properties":{"sql":{"type":"string"}}}`))
	v, err := New(DefaultConfig(), r, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELEC * FROM x", "SELECT id::text FROM users WHERE id = $1", "DROP TABLE zorblax_users CASCADE"} {
		fs := v.CheckToolCall(callOf("run_sql", map[string]string{"sql": q}))
		for _, f := range fs {
			if f.Reason != "unsafe_content" || strings.Contains(f.Message, "zorblax") {
				t.Errorf("%q: %+v", q, f)
			}
		}
		if strings.HasPrefix(q, "DROP") && len(fs) != 1 {
			t.Errorf("%q: %d findings, want 1", q, len(fs))
		}
	}
}

func FuzzSQL(f *testing.F) {
	for _, c := range sqlCases {
		f.Add(c.sql, c.user)
	}
	f.Fuzz(func(t *testing.T, q, user string) {
		for _, x := range judgeSQL(q) {
			_ = userAsked(user, x)
		}
		for _, x := range scanSQL(q) {
			_ = userAsked(user, x)
		}
	})
}

func toolDecl(name, schema string) validator.Tool {
	return validator.Tool{Name: name, Parameters: []byte(schema)}
}

// callOf builds a call whose arguments are the JSON object of args.
func callOf(name string, args map[string]string) validator.ToolCall {
	b, _ := json.Marshal(args)
	return validator.ToolCall{Name: name, Arguments: string(b)}
}
