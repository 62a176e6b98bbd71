package toolpolicy

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // literal values for the parser

	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// SQL is read with TiDB's parser (github.com/pingcap/tidb/pkg/parser): a
// maintained, pure-Go, yacc-built MySQL-dialect parser that PingCAP
// releases as its own module. Compared quickly with the alternatives:
// vitess' sqlparser lives inside the whole vitess module (and the
// standalone copies of it are unmaintained); pg_query_go needs cgo and a C
// build of libpg_query; the CockroachDB-derived PostgreSQL parsers drag in
// CockroachDB's error and decimal packages. TiDB's adds zap and a few small
// pingcap packages. It reads the statements both dialects share (DROP,
// TRUNCATE, ALTER, GRANT, DELETE, UPDATE, SELECT); what it cannot read
// (PostgreSQL's own syntax, other dialects) is classified by the
// tokeniser of sqlscan.go.

// sqlParams are parameter names that hold a SQL statement.
var sqlParams = map[string]bool{"sql": true, "query": true, "statement": true, "stmt": true, "sql_query": true}

// sqlWords are name words of tools that run SQL.
var sqlWords = map[string]bool{"sql": true, "query": true, "database": true, "db": true, "postgres": true,
	"mysql": true, "sqlite": true, "psql": true}

// isSQL recognises a tool that runs SQL by a name word and a statement
// parameter, or by a parameter named sql.
func isSQL(name string, t *validator.Tool) bool {
	if t == nil {
		return false
	}
	named := false
	for _, w := range nameTokens(name) {
		named = named || sqlWords[w]
	}
	for _, p := range paramNames(t.Parameters) {
		l := strings.ToLower(p)
		if l == "sql" || named && sqlParams[l] {
			return true
		}
	}
	return false
}

// sqlText is the statement values of a call.
func sqlText(vals []toolcalls.Value) []toolcalls.Value {
	var out []toolcalls.Value
	for _, v := range vals {
		segs := strings.Split(v.Path, "/")
		if sqlParams[strings.ToLower(segs[len(segs)-1])] {
			out = append(out, v)
		}
	}
	return out
}

// maxSQL bounds the statement text handed to the parser.
const maxSQL = 64 << 10

// sqlFinding is what a statement does that needs the user's say-so.
type sqlFinding struct {
	op     string // DROP, TRUNCATE, ...
	tables []string
}

// tableNames collects the tables a statement names.
type tableNames struct{ names []string }

func (t *tableNames) Enter(n ast.Node) (ast.Node, bool) {
	if tn, ok := n.(*ast.TableName); ok {
		t.names = append(t.names, tn.Name.O)
	}
	return n, false
}

func (t *tableNames) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// judgeSQL returns the dangerous operations in one statement text: read
// by TiDB's parser where it can, by the tokeniser (sqlscan.go) where it
// cannot. Text that is not SQL at all holds no operation; it is never
// reported as malformed, since the database, not this check, decides
// what it accepts.
func judgeSQL(text string) []sqlFinding {
	if len(text) <= maxSQL {
		if out, ok := parseSQL(text); ok {
			return out
		}
	}
	return scanSQL(text)
}

// parseSQL reads a statement text with TiDB's parser; ok is false when
// the parser cannot read it.
func parseSQL(text string) (out []sqlFinding, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			out, ok = nil, false
		}
	}()
	stmts, _, err := parser.New().Parse(text, "", "")
	if err != nil {
		return nil, false
	}
	for _, s := range stmts {
		op := ""
		switch st := s.(type) {
		case *ast.DropTableStmt:
			op = "DROP"
		case *ast.DropDatabaseStmt:
			op = "DROP DATABASE"
		case *ast.TruncateTableStmt:
			op = "TRUNCATE"
		case *ast.AlterTableStmt:
			op = "ALTER"
		case *ast.GrantStmt, *ast.GrantRoleStmt:
			op = "GRANT"
		case *ast.DeleteStmt:
			if st.Where == nil {
				op = "DELETE"
			}
		case *ast.UpdateStmt:
			if st.Where == nil {
				op = "UPDATE"
			}
		}
		if op == "" {
			continue
		}
		var tn tableNames
		s.Accept(&tn)
		if d, ok := s.(*ast.DropDatabaseStmt); ok {
			tn.names = append(tn.names, d.Name.O)
		}
		out = append(out, sqlFinding{op: op, tables: tn.names})
	}
	return out, true
}

// userAsked reports whether the user's messages name the operation and
// every table it touches.
func userAsked(user string, f sqlFinding) bool {
	u := strings.ToLower(user)
	verb := strings.ToLower(strings.Fields(f.op)[0])
	if !containsWord(u, verb) {
		return false
	}
	if len(f.tables) == 0 {
		return false
	}
	for _, t := range f.tables {
		if !containsWord(u, strings.ToLower(t)) {
			return false
		}
	}
	return true
}

func containsWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		a, b := i+j, i+j+len(w)
		if (a == 0 || !isWordRune(s[a-1])) && (b == len(s) || !isWordRune(s[b])) {
			return true
		}
		i = a + 1
	}
}

func isWordRune(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
}

func (v *Validator) checkSQL(call validator.ToolCall, base string) []validator.Finding {
	var out []validator.Finding
	user := v.userText()
	for _, val := range sqlText(toolcalls.Of(call).Values) {
		path := base + "/arguments"
		if val.Path != "" {
			path += "/" + val.Path
		}
		for _, f := range judgeSQL(val.Text) {
			if userAsked(user, f) {
				continue
			}
			out = append(out, validator.Finding{Check: Name, Reason: validator.ReasonUnsafeContent, Path: path,
				Start: 0, End: len(val.Text),
				Message: fmt.Sprintf("call to %s runs %s%s on %d table(s) the user did not ask to change that way",
					quote(call.Name), f.op, whereNote(f.op), len(f.tables))})
		}
	}
	return out
}

func whereNote(op string) string {
	if op == "DELETE" || op == "UPDATE" {
		return " without WHERE"
	}
	return ""
}

// userText joins the user's messages.
func (v *Validator) userText() string {
	var b strings.Builder
	for _, m := range v.req.Messages {
		if m.Role == "user" {
			b.WriteString(m.Content)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
