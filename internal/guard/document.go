package guard

import (
	"encoding/json"
	"strings"
)

// DocKind is what a tool result looks like to the document screen.
type DocKind int

// The document kinds. Each is read for the text in it that could address
// a reader: code for its comments and string literals, markup for its
// text, comments and human-readable attributes, JSON for its string
// values, configuration for its comments and values, e-mail for its
// subject and body; logs and prose as they are.
const (
	DocProse DocKind = iota
	DocCode
	DocMarkup
	DocJSON
	DocConfig
	DocLog
	DocEmail
)

var docKindNames = [...]string{"prose", "code", "markup", "json", "config", "log", "email"}

func (k DocKind) String() string {
	if int(k) < len(docKindNames) {
		return docKindNames[k]
	}
	return "unknown"
}

// sniffLines is how many leading lines kind detection reads.
const sniffLines = 60

// DetectKind guesses what text is from its first lines.
func DetectKind(text string) DocKind {
	t := strings.TrimSpace(text)
	if t == "" {
		return DocProse
	}
	if (t[0] == '{' || t[0] == '[') && (json.Valid([]byte(t)) || isJSONLines(t) || isCutJSON(t)) {
		return DocJSON
	}
	head := t
	if len(head) > 4096 {
		head = head[:4096]
	}
	if isMailHeaderBlock(head) {
		return DocEmail
	}
	lower := strings.ToLower(head)
	if strings.HasPrefix(lower, "<!doctype") || strings.HasPrefix(lower, "<?xml") || strings.Contains(lower, "<html") ||
		strings.Contains(lower, "<body") || strings.Count(lower, "</") >= 4 && strings.Count(lower, "<") > len(lower)/200 {
		return DocMarkup
	}
	lines := strings.SplitN(head, "\n", sniffLines+1)
	if len(lines) > sniffLines {
		lines = lines[:sniffLines]
	}
	var hdr, code, conf, logl, n, cmt int
	for i, l := range lines {
		s := strings.TrimSpace(l)
		if s == "" {
			continue
		}
		// A "#" comment opens lines of shell, Python, Perl and
		// configuration alike (a licence header is all of them), so it
		// says nothing about the kind.
		if s[0] == '#' && !strings.HasPrefix(s, "#!") && !isCodeLine(s) {
			cmt++
			continue
		}
		n++
		if i < 12 && isMailHeader(s) {
			hdr++
		}
		if isCodeLine(s) {
			code++
		}
		if isConfigLine(s) {
			conf++
		}
		if isLogLine(s) {
			logl++
		}
	}
	switch {
	case n == 0 && cmt > 0:
		return DocConfig
	case n == 0:
		return DocProse
	case hdr >= 2:
		return DocEmail
	case logl*2 >= n:
		return DocLog
	case code*10 >= n*3:
		return DocCode
	case conf*2 >= n:
		return DocConfig
	}
	return DocProse
}

// mailHeaders are the header fields that mark a message (RFC 5322 and
// MIME, RFC 2045).
var mailHeaders = []string{"from:", "to:", "subject:", "date:", "received:", "return-path:", "mime-version:", "message-id:",
	"cc:", "reply-to:", "sender:", "in-reply-to:", "references:", "delivered-to:", "content-type:", "content-transfer-encoding:"}

func isMailHeader(s string) bool {
	for _, h := range mailHeaders {
		if len(s) >= len(h) && strings.EqualFold(s[:len(h)], h) {
			return true
		}
	}
	return false
}

// isMailHeaderBlock reports whether head opens with an RFC 5322 header
// block: "Name: value" fields (folded lines start with a blank) up to
// the first empty line, at least two of them, one a message header.
func isMailHeaderBlock(head string) bool {
	fields, known := 0, 0
	for i, l := range strings.Split(head, "\n") {
		l = strings.TrimSuffix(l, "\r")
		switch {
		case l == "":
			return fields >= 2 && known >= 1
		case l[0] == ' ' || l[0] == '\t':
			if i == 0 {
				return false
			}
			continue
		}
		c := strings.IndexByte(l, ':')
		if c <= 0 || strings.ContainsAny(l[:c], " \t") {
			return false
		}
		fields++
		if isMailHeader(l) {
			known++
		}
	}
	return false
}

var codeStarts = []string{"func ", "package ", "import ", "from ", "def ", "class ", "return", "if ", "if(", "for ", "for(",
	"while ", "var ", "let ", "const ", "#include", "#define", "#if", "#endif", "use ", "sub ", "my ", "static ", "public ",
	"private ", "struct ", "typedef ", "export ", "function", "case ", "else", "}", "//", "/*", "* ", "*/", "esac", "fi", "done",
	"then", "local ", "echo ", "module.exports", "require(", "try:", "except", "elif ", "@", "#!"}

func isCodeLine(s string) bool {
	switch s[len(s)-1] {
	case ';', '{', '}', ')', '(', ',', ':':
		if !strings.HasSuffix(s, ".:") && strings.ContainsAny(s, "(){};=") {
			return true
		}
	}
	for _, p := range codeStarts {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return strings.Contains(s, " = ") && strings.ContainsAny(s, "();[]")
}

func isConfigLine(s string) bool {
	if s[0] == '#' || s[0] == ';' || s[0] == '[' && s[len(s)-1] == ']' {
		return true
	}
	if i := strings.IndexAny(s, "=:"); i > 0 && !strings.Contains(s[:i], "  ") && len(strings.Fields(s[:i])) <= 2 {
		return true
	}
	return strings.HasPrefix(s, "- ")
}

// isLogLine: a line opening with a date or time stamp, or a syslog month.
func isLogLine(s string) bool {
	if len(s) < 10 {
		return false
	}
	digits := 0
	for i := 0; i < 10; i++ {
		if s[i] >= '0' && s[i] <= '9' {
			digits++
		}
	}
	if digits >= 6 && (s[4] == '-' || s[2] == ':' || s[2] == '/' || s[4] == '/') {
		return true
	}
	if s[0] == '[' && digits >= 4 {
		return true
	}
	for _, m := range []string{"Jan ", "Feb ", "Mar ", "Apr ", "May ", "Jun ", "Jul ", "Aug ", "Sep ", "Oct ", "Nov ", "Dec "} {
		if strings.HasPrefix(s, m) && digits >= 4 {
			return true
		}
	}
	return false
}

// maxSpans bounds the spans one document yields.
const maxSpans = 4096

// Readable returns the parts of text, read as kind, that are written for
// a reader, joined by line breaks: what the document screen scores.
func Readable(text string, kind DocKind) string {
	var b strings.Builder
	emit := func(s string) {
		s = strings.TrimSpace(s)
		if s == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	switch kind {
	case DocCode:
		codeSpans(text, emit)
	case DocMarkup:
		markupSpans(text, emit)
	case DocJSON:
		jsonSpans(text, emit)
	case DocConfig:
		configSpans(text, emit)
	case DocEmail:
		emailSpans(text, emit)
	case DocProse:
		proseSpans(text, emit)
	default:
		return text
	}
	return b.String()
}

// proseSpans emits prose as it is, except that fenced code blocks
// (Markdown's ``` and ~~~) are read as code.
func proseSpans(text string, emit func(string)) {
	for {
		i := strings.Index(text, "\n```")
		j := strings.Index(text, "\n~~~")
		if i < 0 || j >= 0 && j < i {
			i = j
		}
		if i < 0 {
			emit(text)
			return
		}
		emit(text[:i])
		fence := text[i+1 : i+4]
		rest := text[i+4:]
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			return
		}
		rest = rest[nl+1:]
		end := strings.Index(rest, "\n"+fence)
		if end < 0 {
			end = len(rest)
		}
		codeSpans(rest[:end], emit)
		if end == len(rest) {
			return
		}
		text = rest[end+4:]
	}
}

// stripTags removes markup tags from s.
func stripTags(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			return b.String()
		}
		s = s[i+j+1:]
	}
}

// codeSpans emits the comments and the string literals of at least two
// words of source text in any C-like, shell-like or Python-like
// language: // and /* */ comments, # comments (not C preprocessor lines),
// and "...", '...', `...` and triple-quoted strings.
func codeSpans(text string, emit func(string)) {
	n := 0
	var block strings.Builder // consecutive line comments form one span
	flush := func() {
		if block.Len() > 0 {
			emit(block.String())
			block.Reset()
			n++
		}
	}
	i := 0
	lineStart := true
	for i < len(text) && n < maxSpans {
		c := text[i]
		switch {
		case c == '\n':
			lineStart = true
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r':
			i++
			continue
		case c == '/' && i+1 < len(text) && text[i+1] == '/', c == '#' && !isDirective(text[i:]) && (lineStart || i > 0 && (text[i-1] == ' ' || text[i-1] == '\t')):
			j := strings.IndexByte(text[i:], '\n')
			if j < 0 {
				j = len(text) - i
			}
			body := strings.TrimLeft(text[i:i+j], "/#!")
			if block.Len() > 0 {
				block.WriteByte('\n')
			}
			block.WriteString(body)
			i += j
			lineStart = false
			continue
		}
		if !lineStart || c != '/' && c != '#' {
			// A line that is not a comment ends a comment block.
			if lineStart {
				flush()
			}
		}
		lineStart = false
		switch {
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			flush()
			j := strings.Index(text[i+2:], "*/")
			if j < 0 {
				j = len(text) - i - 2
			}
			emit(strings.ReplaceAll(text[i+2:i+2+j], "\n *", "\n"))
			n++
			i += 2 + j + 2
		case c == '"' || c == '\'' || c == '`':
			if strings.HasPrefix(text[i:], `"""`) || strings.HasPrefix(text[i:], `'''`) {
				q := text[i : i+3]
				j := strings.Index(text[i+3:], q)
				if j < 0 {
					j = len(text) - i - 3
				}
				emit(text[i+3 : i+3+j])
				n++
				i += 3 + j + 3
				continue
			}
			j := i + 1
			for j < len(text) && text[j] != c && (c == '`' || text[j] != '\n') {
				if text[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			s := text[i+1 : min(j, len(text))]
			if strings.Count(s, " ") >= 2 {
				emit(unescape(s))
				n++
			}
			i = j + 1
		default:
			i++
		}
	}
	flush()
}

// isDirective reports a C preprocessor line (#include, #define...), which
// is code, not a comment.
func isDirective(s string) bool {
	for _, d := range []string{"#include", "#define", "#if", "#ifdef", "#ifndef", "#endif", "#else", "#elif", "#undef", "#pragma", "#error", "#line"} {
		if strings.HasPrefix(s, d) {
			return true
		}
	}
	return false
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	return strings.NewReplacer(`\n`, "\n", `\t`, " ", `\"`, `"`, `\'`, "'").Replace(s)
}

// markupSpans emits the text between tags (leaving out style and the
// script element's code, whose comments and strings are read as code),
// comments, and the human-readable attributes alt, title, aria-label,
// placeholder and content.
func markupSpans(text string, emit func(string)) {
	n := 0
	i := 0
	for i < len(text) && n < maxSpans {
		j := strings.IndexByte(text[i:], '<')
		if j < 0 {
			emit(htmlText(text[i:]))
			return
		}
		if j > 0 {
			emit(htmlText(text[i : i+j]))
			n++
		}
		i += j
		if strings.HasPrefix(text[i:], "<!--") {
			k := strings.Index(text[i+4:], "-->")
			if k < 0 {
				k = len(text) - i - 4
			}
			emit(text[i+4 : i+4+k])
			n++
			i += 4 + k + 3
			continue
		}
		k := strings.IndexByte(text[i:], '>')
		if k < 0 {
			emit(htmlText(text[i:]))
			return
		}
		tag := text[i : i+k+1]
		lt := tag
		if hasUpperASCII(tag) {
			lt = lowerASCII(tag)
		}
		for _, a := range []string{"alt=", "title=", "aria-label=", "placeholder=", "content="} {
			if v, ok := attr(tag, lt, a); ok {
				emit(v)
				n++
			}
		}
		i += k + 1
		for _, el := range []string{"script", "style", "pre"} {
			if strings.HasPrefix(lt, "<"+el) && (len(lt) == len(el)+2 || lt[len(el)+1] == ' ' || lt[len(el)+1] == '>') {
				end := indexEndTag(text[i:], el)
				if end < 0 {
					end = len(text) - i
				}
				switch el {
				case "script":
					codeSpans(text[i:i+end], emit)
				case "pre": // a code listing: its comments and strings
					codeSpans(htmlText(stripTags(text[i:i+end])), emit)
				}
				i += end
			}
		}
	}
}

// hasUpperASCII reports whether s holds an ASCII capital letter.
func hasUpperASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// indexEndTag returns the offset in s of the end tag "</el" (el in lower
// case; the tag in any ASCII case, as HTML reads it), or -1. It lowers
// no copy of the rest of the document for each element it looks after.
func indexEndTag(s, el string) int {
	for off := 0; ; {
		k := strings.Index(s[off:], "</")
		if k < 0 {
			return -1
		}
		k += off
		if e := k + 2 + len(el); e <= len(s) && equalLowerASCII(s[k+2:e], el) {
			return k
		}
		off = k + 2
	}
}

// equalLowerASCII reports whether s with its ASCII letters lowered is low.
func equalLowerASCII(s, low string) bool {
	if len(s) != len(low) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != low[i] {
			return false
		}
	}
	return true
}

// attr finds name="value" or name='value' in a tag, case-insensitively
// (lt is the tag with its ASCII letters lowered, byte for byte).
func attr(tag, lt, name string) (string, bool) {
	for off := 0; ; {
		k := strings.Index(lt[off:], name)
		if k < 0 {
			return "", false
		}
		k += off
		off = k + len(name)
		if k > 0 && lt[k-1] != ' ' && lt[k-1] != '\n' && lt[k-1] != '\t' {
			continue
		}
		if off >= len(tag) {
			return "", false
		}
		q := tag[off]
		if q != '"' && q != '\'' {
			continue
		}
		e := strings.IndexByte(tag[off+1:], q)
		if e < 0 {
			return "", false
		}
		return htmlText(tag[off+1 : off+1+e]), true
	}
}

var entities = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&#39;", "'", "&nbsp;", " ", "&apos;", "'")

func htmlText(s string) string { return entities.Replace(s) }

// configSpans emits the comments and the values of configuration lines.
func configSpans(text string, emit func(string)) {
	n := 0
	for _, l := range strings.Split(text, "\n") {
		if n >= maxSpans {
			return
		}
		s := strings.TrimSpace(l)
		switch {
		case s == "":
			continue
		case s[0] == '#' || s[0] == ';':
			emit(strings.TrimLeft(s, "#; "))
		case strings.HasPrefix(s, "//"):
			emit(strings.TrimLeft(s, "/ "))
		default:
			if i := strings.IndexAny(s, "=:"); i > 0 {
				emit(strings.Trim(strings.TrimSpace(s[i+1:]), `"'`))
			} else {
				emit(strings.TrimPrefix(s, "- "))
			}
		}
		n++
	}
}

// emailSpans emits the subject and the body of a message (its other
// headers are addresses and dates).
func emailSpans(text string, emit func(string)) {
	head, body, _ := strings.Cut(text, "\n\n")
	if i := strings.Index(head, "\r\n\r\n"); i >= 0 {
		head, body = head[:i], head[i+4:]+body
	}
	for _, l := range strings.Split(head, "\n") {
		if len(l) > 8 && strings.EqualFold(l[:8], "subject:") {
			emit(l[8:])
		}
	}
	emit(mimeText(body))
}

// mimeText returns a message body without its MIME structure: boundary
// lines, the header block that opens each part and base64 lines (an
// attachment's bytes are not text a reader reads).
func mimeText(body string) string {
	var b strings.Builder
	inHeaders := false
	for _, l := range strings.SplitAfter(body, "\n") {
		s := strings.TrimRight(l, "\r\n")
		switch {
		case inHeaders:
			inHeaders = s != ""
			continue
		case len(s) > 2 && strings.HasPrefix(s, "--") && !strings.ContainsAny(s, " \t"):
			inHeaders = true
			continue
		case isBase64Line(s):
			continue
		}
		b.WriteString(l)
	}
	return b.String()
}

func isBase64Line(s string) bool {
	if len(s) < 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}
