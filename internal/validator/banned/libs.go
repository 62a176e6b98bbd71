package banned

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// libMatcher finds imports of banned libraries in complete lines.
type libMatcher struct {
	banned []bannedLib

	line      []byte // the current line (capped at maxLine bytes)
	lineStart int    // its offset in the output
	inGoBlock bool   // inside a Go import ( ... ) block

	identAt int // index in line where the trailing identifier begins
	start   int // 1 = the line starts like an import, -1 = it cannot, 0 = not known yet
	holdLen int // len(line) when holdAt was computed
	holdAt  int // index in line from which to hold back
	callAt  int // index of the first call-style import in line, or -1
	scanned int // bytes of line searched for calls
}

const maxLine = 2048

func newLibMatcher(libs []string) (*libMatcher, error) {
	l := &libMatcher{callAt: -1, holdLen: -1}
	for _, b := range libs {
		b = strings.ToLower(strings.TrimSpace(b))
		if b == "" {
			return nil, fmt.Errorf("banned: library name is empty")
		}
		l.banned = append(l.banned, bannedLib{
			name:     b,
			exact:    []string{b, b + ".h", b + ".hpp"},
			prefixes: []string{b + ".", b + "/", b + "::"},
		})
	}
	return l, nil
}

// rune adds one rune (size bytes at offset at) to the current line and
// parses the line when it ends.
func (l *libMatcher) rune(r rune, at, size int, add func(validator.Finding)) {
	if r == '\n' {
		l.endLine(add)
		l.lineStart = at + size
		return
	}
	if len(l.line) == 0 && l.lineStart != at {
		l.lineStart = at
	}
	if len(l.line)+size > maxLine {
		return
	}
	if r < utf8.RuneSelf {
		if !isIdent(byte(r)) {
			l.identAt = len(l.line) + 1
		}
		l.line = append(l.line, byte(r))
		return
	}
	l.identAt = len(l.line) + size
	if r == utf8.RuneError && size == 1 {
		l.line = append(l.line, '?')
		return
	}
	l.line = utf8.AppendRune(l.line, r)
}

func isIdent(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func (l *libMatcher) close(add func(validator.Finding)) {
	l.endLine(add)
}

// keywords that can open an import-shaped line.
const maxKeyword = len("library")

var keywords = []string{"import", "from", "use", "pub", "extern", "#", "library", "require", "const", "let", "var", "export", "@import"}

// lineCouldImport reports whether a line starts like an import or
// contains a call-style import.
func lineCouldImport(line []byte, inGoBlock bool) bool {
	return startsLikeImport(line, inGoBlock) || callIndex(line, 0) >= 0
}

var calls = []string{"require(", "library(", "import(", "requireNamespace("}

// callIndex returns the index of the first call-style import in b that
// starts a word (as the patterns' \b demands), or -1.
func callIndex(b []byte, start int) int {
	at := -1
	for _, k := range calls {
		for from := start; from < len(b); {
			i := bytes.Index(b[from:], []byte(k))
			if i < 0 {
				break
			}
			i += from
			if i == 0 || !isIdent(b[i-1]) {
				if at < 0 || i < at {
					at = i
				}
				break
			}
			from = i + 1
		}
	}
	return at
}

func startsLikeImport(line []byte, inGoBlock bool) bool {
	if inGoBlock {
		return true
	}
	t := bytes.TrimLeft(line, " \t>")
	if len(t) == 0 {
		return true
	}
	for _, k := range keywords {
		if len(t) <= len(k) {
			if strings.HasPrefix(k, string(t)) {
				return true
			}
		} else if bytes.HasPrefix(t, []byte(k)) {
			return true
		}
	}
	return false
}

// hold returns the offset from which the current line must be held back:
// the line start when the line starts like an import, else the start of
// the first call-style import in it, else the start of a tail that could
// begin one. It searches only what was added since the last call.
func (l *libMatcher) hold() int {
	if len(l.line) != l.holdLen || len(l.line) == 0 {
		l.holdLen = len(l.line)
		if l.callAt < 0 {
			// Every call ends in '(': look for the keywords only when one came.
			if bytes.IndexByte(l.line[l.scanned:], '(') >= 0 {
				from := max(0, l.scanned-len("requireNamespace("))
				if i := callIndex(l.line, from); i >= 0 {
					l.callAt = i
				}
			}
			l.scanned = len(l.line)
		}
		if l.start == 0 {
			if startsLikeImport(l.line, l.inGoBlock) {
				if len(bytes.TrimLeft(l.line, " \t>")) > maxKeyword {
					l.start = 1 // settled: it does
				}
			} else {
				l.start = -1 // a longer line cannot start like one either
			}
		}
		switch {
		case l.start >= 0:
			l.holdAt = 0
		case l.callAt >= 0:
			l.holdAt = l.callAt
		default:
			// The trailing identifier may grow into "require(".
			l.holdAt = len(l.line)
			if tail := l.line[min(l.identAt, len(l.line)):]; len(tail) > 0 && len(tail) < len("requireNamespace(") {
				for _, k := range calls {
					if len(tail) < len(k) && k[:len(tail)] == string(tail) {
						l.holdAt = l.identAt
						break
					}
				}
			}
		}
	}
	return l.lineStart + l.holdAt
}

var (
	rePyImport   = regexp.MustCompile(`^\s*import\s+([\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)\s*(?:#.*)?$`)
	rePyFrom     = regexp.MustCompile(`^\s*from\s+([\w.]+)\s+import\b`)
	reJSFrom     = regexp.MustCompile(`^\s*(?:import|export)\b[^'"]*?\bfrom\s*['"]([^'"]+)['"]`)
	reJSBare     = regexp.MustCompile(`^\s*import\s*['"]([^'"]+)['"]`)
	reCall       = regexp.MustCompile(`\b(?:require|import|requireNamespace)\s*\(\s*['"]([^'"]+)['"]\s*[,)]`)
	reRLibrary   = regexp.MustCompile(`\b(?:library|require)\(\s*['"]?([\w.]+)['"]?\s*[,)]`)
	reRustUse    = regexp.MustCompile(`^\s*(?:pub(?:\([\w:]+\))?\s+)?use\s+(?:::)?(\w+)(?:::|\s*;|\s+as\b|\s*$)`)
	reRustCrate  = regexp.MustCompile(`^\s*extern\s+crate\s+(\w+)`)
	reGoImport   = regexp.MustCompile(`^\s*import\s+(?:[\w.]+\s+)?"([^"]+)"`)
	reGoBlockBeg = regexp.MustCompile(`^\s*import\s*\(\s*(?://.*)?$`)
	reGoBlockEnd = regexp.MustCompile(`^\s*\)`)
	reGoSpec     = regexp.MustCompile(`^\s*(?:[\w.]+\s+)?"([^"]+)"`)
	reCInclude   = regexp.MustCompile(`^\s*#\s*(?:include|import)\s*[<"]([^>"]+)[>"]`)
)

// endLine parses the finished line for imports and resets it.
func (l *libMatcher) endLine(add func(validator.Finding)) {
	defer func() {
		l.line, l.holdLen, l.callAt, l.scanned, l.identAt, l.start = l.line[:0], -1, -1, 0, 0, 0
	}()
	if len(l.line) == 0 || !lineCouldImport(l.line, l.inGoBlock) {
		return
	}
	line := string(l.line)
	var seen []int
	found := func(name string, idx int) {
		for _, s := range seen {
			if s == idx {
				return
			}
		}
		seen = append(seen, idx)
		if b := l.bannedMatch(name); b != "" {
			add(validator.Finding{
				Check: Name, Reason: validator.ReasonBannedContent,
				Start: l.lineStart + idx, End: l.lineStart + idx + len(name),
				Message: fmt.Sprintf("import of banned library %q", b),
			})
		}
	}
	sub := func(re *regexp.Regexp) {
		for _, m := range re.FindAllStringSubmatchIndex(line, -1) {
			found(line[m[2]:m[3]], m[2])
		}
	}
	if l.inGoBlock {
		if reGoBlockEnd.MatchString(line) {
			l.inGoBlock = false
			return
		}
		sub(reGoSpec)
		return
	}
	if reGoBlockBeg.MatchString(line) {
		l.inGoBlock = true
		return
	}
	// Run only the patterns the line's first word allows: a regexp per
	// line is the expensive part of this check.
	t := strings.TrimLeft(line, " \t>")
	switch {
	case strings.HasPrefix(t, "import"):
		if m := rePyImport.FindStringSubmatchIndex(line); m != nil {
			// import a.b as c, d
			list := line[m[2]:m[3]]
			base := m[2]
			for _, part := range strings.Split(list, ",") {
				lead := len(part) - len(strings.TrimLeft(part, " \t"))
				found(strings.Fields(part)[0], base+lead)
				base += len(part) + 1
			}
			return
		}
		if first(line, found, reJSFrom, reJSBare, reGoImport) {
			return
		}
	case strings.HasPrefix(t, "from"):
		if first(line, found, rePyFrom) {
			return
		}
	case strings.HasPrefix(t, "export"):
		if first(line, found, reJSFrom) {
			return
		}
	case strings.HasPrefix(t, "use"), strings.HasPrefix(t, "pub"):
		if first(line, found, reRustUse) {
			return
		}
	case strings.HasPrefix(t, "extern"):
		if first(line, found, reRustCrate) {
			return
		}
	case strings.HasPrefix(t, "#"):
		if first(line, found, reCInclude) {
			return
		}
	}
	if callIndex(l.line, 0) >= 0 {
		sub(reCall)
		sub(reRLibrary)
	}
}

// first reports the name captured by the first of res that matches line.
func first(line string, found func(string, int), res ...*regexp.Regexp) bool {
	for _, re := range res {
		if m := re.FindStringSubmatchIndex(line); m != nil {
			found(line[m[2]:m[3]], m[2])
			return true
		}
	}
	return false
}

// bannedMatch returns the banned library that module name refers to, or "".
func (l *libMatcher) bannedMatch(name string) string {
	n := strings.ToLower(name)
	last := n
	if i := strings.LastIndexByte(n, '/'); i >= 0 {
		last = n[i+1:]
	}
	for _, b := range l.banned {
		for _, e := range b.exact {
			if n == e || last == e {
				return b.name
			}
		}
		for _, p := range b.prefixes {
			if strings.HasPrefix(n, p) {
				return b.name
			}
		}
	}
	return ""
}

// bannedLib is one banned library with the module names that refer to it.
type bannedLib struct {
	name     string   // lower case
	exact    []string // names equal to it: x, x.h, x.hpp
	prefixes []string // prefixes of its sub-modules: x., x/, x::
}
