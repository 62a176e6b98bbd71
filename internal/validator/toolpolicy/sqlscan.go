package toolpolicy

import "strings"

// When TiDB's parser cannot read a statement (PostgreSQL's own syntax:
// '::' casts, $1 parameters, RETURNING, ON CONFLICT, DROP ... CASCADE,
// CREATE EXTENSION, COPY, dollar-quoted bodies, or another dialect) the
// statement is still classified, by a tokeniser that knows SQL's quoting
// (strings with '' and E'' escapes, "quoted" and `quoted` names,
// dollar-quoted bodies, -- and nested /* */ comments) and nothing of its
// grammar: statements split at ';', each judged by its leading keyword,
// the tables after it and a WHERE at its own depth. A DO block's body and
// the strings an EXECUTE inside it runs are read the same way. The only
// pure-Go PostgreSQL parser the module proxy serves here,
// github.com/wasilibs/go-pgquery (libpg_query compiled to WebAssembly and
// run by wazero), took 2.3 s to compile on its first parse and 111 us a
// statement after on the build machine, and brings wazero and protobuf;
// the CockroachDB-derived parsers are not served. Classifying needs the
// statement's shape, not its grammar, so the tokeniser is written here.

// sqlTokKind is a kind of SQL token.
type sqlTokKind uint8

const (
	sqlWord   sqlTokKind = iota // a keyword or an unquoted name
	sqlName                     // a "quoted" or `quoted` name
	sqlString                   // a string or a dollar-quoted body (text is its content)
	sqlOther                    // a number, a parameter, an operator or punctuation
)

func (k sqlTokKind) String() string {
	switch k {
	case sqlWord:
		return "word"
	case sqlName:
		return "quoted name"
	case sqlString:
		return "string"
	}
	return "other"
}

type sqlTok struct {
	kind sqlTokKind
	text string // a word upper-cased; a name or string unquoted
}

// is reports whether t is the keyword kw (upper case).
func (t sqlTok) is(kw string) bool { return t.kind == sqlWord && t.text == kw }

// punct reports whether t is the punctuation c.
func (t sqlTok) punct(c byte) bool { return t.kind == sqlOther && len(t.text) == 1 && t.text[0] == c }

// maxSQLTokens bounds the tokens read from one value.
const maxSQLTokens = 1 << 16

// sqlTokens splits s into tokens. It never fails: an unclosed string,
// name or comment runs to the end of the text.
func sqlTokens(s string) []sqlTok {
	var out []sqlTok
	for i := 0; i < len(s) && len(out) < maxSQLTokens; {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return out
			}
			i += j + 1
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			i = skipBlockComment(s, i)
		case c == '\'':
			text, n := sqlQuoted(s[i:], '\'', false)
			out = append(out, sqlTok{sqlString, text})
			i += n
		case (c == 'E' || c == 'e') && i+1 < len(s) && s[i+1] == '\'':
			text, n := sqlQuoted(s[i+1:], '\'', true)
			out = append(out, sqlTok{sqlString, text})
			i += 1 + n
		case c == '"' || c == '`':
			text, n := sqlQuoted(s[i:], c, false)
			out = append(out, sqlTok{sqlName, text})
			i += n
		case c == '$' && i+1 < len(s) && isDigit(s[i+1]):
			j := i + 1
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			out = append(out, sqlTok{sqlOther, s[i:j]})
			i = j
		case c == '$':
			if text, n, ok := dollarQuoted(s[i:]); ok {
				out = append(out, sqlTok{sqlString, text})
				i += n
				continue
			}
			out = append(out, sqlTok{sqlOther, "$"})
			i++
		case isSQLWordStart(c):
			j := i + 1
			for j < len(s) && (isSQLWordStart(s[j]) || isDigit(s[j]) || s[j] == '$') {
				j++
			}
			out = append(out, sqlTok{sqlWord, strings.ToUpper(s[i:j])})
			i = j
		case isDigit(c):
			j := i + 1
			for j < len(s) && (isDigit(s[j]) || s[j] == '.' || s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
				j++
			}
			out = append(out, sqlTok{sqlOther, s[i:j]})
			i = j
		default:
			out = append(out, sqlTok{sqlOther, s[i : i+1]})
			i++
		}
	}
	return out
}

func isSQLWordStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

// skipBlockComment returns the offset after the /* */ comment at i
// (PostgreSQL nests them).
func skipBlockComment(s string, i int) int {
	depth := 0
	for i < len(s) {
		switch {
		case s[i] == '/' && i+1 < len(s) && s[i+1] == '*':
			depth++
			i += 2
		case s[i] == '*' && i+1 < len(s) && s[i+1] == '/':
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return i
}

// sqlQuoted reads the quoted text at the start of s (s[0] is q): a
// doubled quote stands for one, and with backslash a backslash escapes
// the next byte. It returns the content and the bytes read.
func sqlQuoted(s string, q byte, backslash bool) (string, int) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case backslash && c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == q && i+1 < len(s) && s[i+1] == q:
			i++
			b.WriteByte(q)
		case c == q:
			return b.String(), i + 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), len(s)
}

// dollarQuoted reads a $tag$...$tag$ body at the start of s.
func dollarQuoted(s string) (text string, n int, ok bool) {
	j := 1
	for j < len(s) && (isSQLWordStart(s[j]) || j > 1 && isDigit(s[j])) {
		j++
	}
	if j >= len(s) || s[j] != '$' {
		return "", 0, false
	}
	tag := s[:j+1]
	end := strings.Index(s[j+1:], tag)
	if end < 0 {
		return s[j+1:], len(s), true
	}
	return s[j+1 : j+1+end], j + 1 + end + len(tag), true
}

// maxSQLDepth bounds how deep DO bodies and EXECUTE strings are read,
// maxCTEDepth how deep WITH clauses nest.
const (
	maxSQLDepth = 4
	maxCTEDepth = 32
)

// scanSQL classifies the statements of s by their tokens.
func scanSQL(s string) []sqlFinding {
	return scanSQLTokens(sqlTokens(s), 0)
}

func scanSQLTokens(toks []sqlTok, depth int) []sqlFinding {
	var out []sqlFinding
	for len(toks) > 0 {
		end := 0
		for end < len(toks) && !toks[end].punct(';') {
			end++
		}
		out = append(out, classifySQL(toks[:end], depth)...)
		if end == len(toks) {
			break
		}
		toks = toks[end+1:]
	}
	return out
}

// classifySQL judges one statement's tokens.
func classifySQL(st []sqlTok, depth int) []sqlFinding {
	var out []sqlFinding
	// A WITH clause: each body in parentheses is a statement of its own
	// (a DELETE there runs); the statement goes on after the last.
	if len(st) > 0 && st[0].is("WITH") {
		if depth > maxCTEDepth {
			return out
		}
		i := 1
		for {
			for i < len(st) && !(st[i].punct('(') && (st[i-1].is("AS") || st[i-1].is("MATERIALIZED"))) {
				if st[i].punct('(') {
					i = matchParen(st, i) // a column list
				}
				i++
			}
			if i >= len(st) {
				return out
			}
			end := matchParen(st, i)
			out = append(out, classifySQL(st[i+1:end], depth+1)...)
			i = end + 1
			if i < len(st) && st[i].punct(',') {
				i++
				continue
			}
			break
		}
		st = st[i:]
	}
	if len(st) > 0 && st[0].is("EXPLAIN") {
		// EXPLAIN ANALYZE runs the statement; EXPLAIN alone does not.
		i, analyze := 1, false
		for i < len(st) && (st[i].kind == sqlWord && explainWords[st[i].text] || st[i].punct('(') || st[i].punct(')') || st[i].punct(',')) {
			analyze = analyze || st[i].is("ANALYZE") || st[i].is("ANALYSE")
			i++
		}
		if !analyze {
			return out
		}
		st = st[i:]
	}
	if len(st) == 0 || st[0].kind != sqlWord {
		return out
	}
	switch st[0].text {
	case "DROP":
		i := 1
		for i < len(st) && st[i].kind == sqlWord && objectWords[st[i].text] {
			i++
		}
		op := "DROP"
		if i > 1 && (st[1].is("DATABASE") || st[1].is("SCHEMA")) {
			op += " " + st[1].text
		}
		out = append(out, sqlFinding{op: op, tables: sqlNames(st, i, false)})
	case "TRUNCATE":
		i := 1
		for i < len(st) && (st[i].is("TABLE") || st[i].is("ONLY")) {
			i++
		}
		out = append(out, sqlFinding{op: "TRUNCATE", tables: sqlNames(st, i, false)})
	case "ALTER":
		i := 1
		for i < len(st) && st[i].kind == sqlWord && objectWords[st[i].text] {
			i++
		}
		out = append(out, sqlFinding{op: "ALTER", tables: sqlNames(st, i, true)})
	case "GRANT":
		f := sqlFinding{op: "GRANT"}
		for i := 1; i < len(st) && !st[i].is("TO"); i++ {
			if st[i].is("ON") {
				j := i + 1
				for j < len(st) && st[j].kind == sqlWord && (objectWords[st[j].text] || st[j].is("ALL") || st[j].is("IN")) {
					j++
				}
				f.tables = sqlNames(st, j, false)
				break
			}
		}
		out = append(out, f)
	case "DELETE", "UPDATE":
		i := 1
		if st[0].text == "DELETE" && i < len(st) && st[i].is("FROM") {
			i++
		}
		if i < len(st) && st[i].is("ONLY") {
			i++
		}
		if !whereAtTop(st) {
			out = append(out, sqlFinding{op: st[0].text, tables: sqlNames(st, i, true)})
		}
	case "DO":
		if depth < maxSQLDepth {
			for _, t := range st[1:] {
				if t.kind == sqlString {
					out = append(out, scanPLBody(t.text, depth+1)...)
					break
				}
			}
		}
	}
	return out
}

// scanPLBody reads a PL/pgSQL body: statements end at ';' and begin after
// BEGIN, THEN, ELSE, LOOP and DECLARE; EXECUTE runs the string it names.
func scanPLBody(body string, depth int) []sqlFinding {
	toks := sqlTokens(body)
	var out []sqlFinding
	start := 0
	flush := func(end int) {
		seg := toks[start:end]
		if len(seg) > 0 && seg[0].is("EXECUTE") {
			for _, t := range seg[1:] {
				if t.kind == sqlString {
					out = append(out, scanSQLTokens(sqlTokens(t.text), depth+1)...)
					break
				}
			}
		} else if len(seg) > 0 {
			out = append(out, classifySQL(seg, depth)...)
		}
	}
	for i, t := range toks {
		if t.punct(';') || t.kind == sqlWord && plStarts[t.text] {
			flush(i)
			start = i + 1
		}
	}
	flush(len(toks))
	return out
}

var plStarts = map[string]bool{"BEGIN": true, "THEN": true, "ELSE": true, "LOOP": true, "DECLARE": true}

// explainWords are EXPLAIN's options.
var explainWords = map[string]bool{"ANALYZE": true, "ANALYSE": true, "VERBOSE": true, "COSTS": true, "BUFFERS": true,
	"FORMAT": true, "TEXT": true, "JSON": true, "YAML": true, "XML": true, "TRUE": true, "FALSE": true, "ON": true,
	"OFF": true, "SETTINGS": true, "WAL": true, "TIMING": true, "SUMMARY": true}

// objectWords are the words between DROP or ALTER and the names.
var objectWords = map[string]bool{
	"TABLE": true, "TABLES": true, "VIEW": true, "MATERIALIZED": true, "INDEX": true, "CONCURRENTLY": true,
	"SCHEMA": true, "DATABASE": true, "SEQUENCE": true, "FUNCTION": true, "PROCEDURE": true, "EXTENSION": true,
	"TYPE": true, "DOMAIN": true, "ROLE": true, "USER": true, "TRIGGER": true, "FOREIGN": true, "TEMPORARY": true,
	"TEMP": true, "IF": true, "EXISTS": true, "ONLY": true, "POLICY": true, "RULE": true, "SERVER": true,
	"PUBLICATION": true, "SUBSCRIPTION": true, "COLLATION": true, "AGGREGATE": true, "OWNED": true, "BY": true,
	"UNLOGGED": true, "EVENT": true, "SYSTEM": true, "TABLESPACE": true, "GROUP": true,
}

// sqlNames reads the comma-separated names from st[i] on (one when
// single), each possibly schema-qualified; a name is kept unqualified.
func sqlNames(st []sqlTok, i int, single bool) []string {
	var out []string
	for i < len(st) {
		if st[i].kind != sqlWord && st[i].kind != sqlName {
			break
		}
		name := st[i].text
		if st[i].kind == sqlWord {
			name = strings.ToLower(name)
		}
		i++
		for i+1 < len(st) && st[i].punct('.') && (st[i+1].kind == sqlWord || st[i+1].kind == sqlName) {
			name = st[i+1].text
			if st[i+1].kind == sqlWord {
				name = strings.ToLower(name)
			}
			i += 2
		}
		out = append(out, name)
		if single || i >= len(st) || !st[i].punct(',') {
			break
		}
		i++
	}
	return out
}

// matchParen returns the index of the ')' closing the '(' at st[i], or
// the last index.
func matchParen(st []sqlTok, i int) int {
	depth := 0
	for j := i; j < len(st); j++ {
		switch {
		case st[j].punct('('):
			depth++
		case st[j].punct(')'):
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return len(st) - 1
}

// whereAtTop reports whether a statement has a WHERE outside any
// parentheses (a WHERE in a subquery limits the subquery, not the rows
// changed).
func whereAtTop(st []sqlTok) bool {
	depth := 0
	for _, t := range st {
		switch {
		case t.punct('('):
			depth++
		case t.punct(')'):
			depth--
		case depth == 0 && t.is("WHERE"):
			return true
		}
	}
	return false
}
