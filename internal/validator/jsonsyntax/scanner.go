package jsonsyntax

import (
	"fmt"
)

// This scanner is hand-written rather than taken from a library because it
// must be incremental at the byte level (a chunk may end inside a string,
// an escape, a number or a UTF-8 sequence), must stop at the first byte
// that can no longer become valid JSON and say why, and must cost a few
// nanoseconds per byte on the per-chunk hot path. encoding/json's scanner
// is internal, and the streaming decoders (encoding/json/v2's jsontext,
// json-iterator) work on whole tokens and report errors later than the
// first bad byte.

// Kind is the type of a JSON value, known from its first byte.
type Kind uint8

// The kinds of JSON values.
const (
	KindNone Kind = iota
	KindObject
	KindArray
	KindString
	KindNumber
	KindBool
	KindNull
)

var kindNames = [...]string{"none", "object", "array", "string", "number", "boolean", "null"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ErrorKind classifies a syntax error.
type ErrorKind uint8

// The classes of syntax errors. Repairable reports which ones Repair can fix.
const (
	ErrNone ErrorKind = iota
	ErrUnexpected
	ErrProseBefore
	ErrFence
	ErrTrailingComma
	ErrSingleQuote
	ErrUnquotedKey
	ErrNonFinite
	ErrBadLiteral
	ErrBadNumber
	ErrBadEscape
	ErrControlChar
	ErrBadUTF8
	ErrSecondValue
	ErrTooDeep
	ErrUnterminated
	ErrEmpty
)

var errorKindNames = [...]string{
	"none", "unexpected", "prose_before", "fence", "trailing_comma", "single_quote",
	"unquoted_key", "non_finite", "bad_literal", "bad_number", "bad_escape",
	"control_char", "bad_utf8", "second_value", "too_deep", "unterminated", "empty",
}

func (k ErrorKind) String() string {
	if int(k) < len(errorKindNames) {
		return errorKindNames[k]
	}
	return fmt.Sprintf("ErrorKind(%d)", int(k))
}

// Repairable reports whether Repair can usually fix an error of this kind
// mechanically (it may still fail if the text has other errors later).
func (k ErrorKind) Repairable() bool {
	switch k {
	case ErrTrailingComma, ErrSingleQuote, ErrFence, ErrUnterminated:
		return true
	}
	return false
}

// SyntaxError is the first byte at which the text can no longer become
// valid JSON. At end of input (ErrUnterminated, ErrEmpty) Offset is the
// length of the text.
type SyntaxError struct {
	Offset int
	Kind   ErrorKind
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// Handler receives the structure of the document as the Scanner sees it.
// Offsets are absolute byte offsets. Raw texts are the exact bytes of the
// token (strings with their quotes and escapes); they are nil when the
// token was longer than the capture limit. The slices are only valid
// during the call.
type Handler interface {
	// BeginValue is called at the first byte of every value.
	BeginValue(k Kind, off int)
	// Key is called when an object key string is complete.
	Key(raw []byte, start, end int)
	// EndValue is called when a value is complete; end is one past its
	// last byte. raw is set for scalars only.
	EndValue(k Kind, raw []byte, end int)
}

// captureLimit bounds the bytes a Scanner with a Handler keeps of one
// scalar or key.
const captureLimit = 4096

// DefaultMaxDepth is the nesting limit when none is configured.
const DefaultMaxDepth = 128

type state uint8

const (
	stStart    state = iota // before the top-level value
	stValue                 // after ':'
	stArrFirst              // after '[' (value or ']')
	stArrNext               // after ',' in an array (value; ']' is a trailing comma)
	stObjFirst              // after '{' (key or '}')
	stObjNext               // after ',' in an object (key; '}' is a trailing comma)
	stColon                 // after a key
	stAfter                 // after a value inside a container
	stDone                  // after the top-level value
	stStr                   // inside a string
	stStrEsc                // after a backslash
	stStrHex                // inside \uXXXX
	stStrUTF8               // inside a multi-byte UTF-8 sequence in a string
	stLit                   // inside true / false / null
	stNumMinus              // after '-'
	stNumZero               // after a leading 0
	stNumInt                // in the integer digits
	stNumDot                // after '.'
	stNumFrac               // in the fraction digits
	stNumE                  // after e / E
	stNumESign              // after the exponent sign
	stNumExp                // in the exponent digits
	stFailed
)

// byte classes for the string fast path: 0 ordinary, 1 stop.
var strStop = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return
}()

// Scanner checks JSON syntax incrementally, byte by byte. The zero value
// is not ready: use NewScanner. A Scanner is not safe for concurrent use.
type Scanner struct {
	h        Handler
	maxDepth int

	st       state
	stack    []byte // '{' or '['
	off      int    // bytes consumed
	err      *SyntaxError
	inKey    bool
	lit      string
	litIdx   int
	hexLeft  int
	u8Left   int
	u8Lo     byte
	u8Hi     byte
	valStart int
	comma    int // offset of the last ',' (for trailing comma messages)
	buf      []byte
	bufOver  bool
}

// NewScanner returns a scanner with the given nesting limit (<= 0 means
// DefaultMaxDepth) and optional handler (nil for a pure syntax check).
func NewScanner(maxDepth int, h Handler) *Scanner {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	return &Scanner{h: h, maxDepth: maxDepth, stack: make([]byte, 0, 16)}
}

// Err returns the first syntax error, or nil.
func (s *Scanner) Err() *SyntaxError { return s.err }

// Offset returns the number of bytes consumed.
func (s *Scanner) Offset() int { return s.off }

// Done reports whether the top-level value is complete (only whitespace
// may follow). A top-level number is complete only once a byte after it
// (or Close) shows it has ended.
func (s *Scanner) Done() bool { return s.st == stDone }

// Depth returns the current container nesting depth.
func (s *Scanner) Depth() int { return len(s.stack) }

func (s *Scanner) fail(at int, k ErrorKind, format string, args ...any) {
	s.err = &SyntaxError{Offset: at, Kind: k, Msg: fmt.Sprintf(format, args...)}
	s.st = stFailed
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// Write feeds the next bytes. It never returns an error; after the first
// syntax error it only counts bytes. Check Err.
func (s *Scanner) Write(p []byte) (int, error) {
	if s.st == stFailed {
		s.off += len(p)
		return len(p), nil
	}
	base := s.off
	i := 0
	for i < len(p) {
		c := p[i]
		switch s.st {
		case stStr:
			// Fast path: run over ordinary string bytes.
			j := i
			for j < len(p) && !strStop[p[j]] {
				j++
			}
			if s.h != nil {
				s.capture(p[i:j])
			}
			if j == len(p) {
				i = j
				continue
			}
			i = j
			c = p[i]
			if s.h != nil {
				s.capture(p[i : i+1])
			}
			switch {
			case c == '"':
				s.endString(base + i + 1)
			case c == '\\':
				s.st = stStrEsc
			case c < 0x20:
				s.fail(base+i, ErrControlChar, "control character %s inside a string must be escaped", quoteByte(c))
			default:
				s.startUTF8(c, base+i)
			}
		case stStrEsc:
			if s.h != nil {
				s.capture(p[i : i+1])
			}
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.st = stStr
			case 'u':
				s.st, s.hexLeft = stStrHex, 4
			default:
				s.fail(base+i, ErrBadEscape, "invalid escape \\%s in string", string(rune(c)))
			}
		case stStrHex:
			if s.h != nil {
				s.capture(p[i : i+1])
			}
			if !isHex(c) {
				s.fail(base+i, ErrBadEscape, "invalid \\u escape: %s is not a hex digit", quoteByte(c))
				break
			}
			s.hexLeft--
			if s.hexLeft == 0 {
				s.st = stStr
			}
		case stStrUTF8:
			if s.h != nil {
				s.capture(p[i : i+1])
			}
			if c < s.u8Lo || c > s.u8Hi {
				s.fail(base+i, ErrBadUTF8, "invalid UTF-8 in string (%s)", quoteByte(c))
				break
			}
			s.u8Lo, s.u8Hi = 0x80, 0xbf
			s.u8Left--
			if s.u8Left == 0 {
				s.st = stStr
			}
		case stLit:
			if c != s.lit[s.litIdx] {
				if len(s.stack) == 0 {
					s.fail(base+i, ErrProseBefore, "expected a JSON value, found text")
				} else {
					s.fail(base+i, ErrBadLiteral, "invalid literal: expected %q, found %s", s.lit, quoteByte(c))
				}
				break
			}
			if s.h != nil {
				s.capture(p[i : i+1])
			}
			s.litIdx++
			if s.litIdx == len(s.lit) {
				k := KindBool
				if s.lit == "null" {
					k = KindNull
				}
				s.endScalar(k, base+i+1)
			}
		case stNumMinus, stNumZero, stNumInt, stNumDot, stNumFrac, stNumE, stNumESign, stNumExp:
			if s.number(c, base+i) {
				if s.h != nil {
					s.capture(p[i : i+1])
				}
			} else if s.st != stFailed {
				// The number ended before c: process c again in the new state.
				continue
			}
		case stDone:
			if !isSpace(c) {
				s.fail(base+i, ErrSecondValue, "unexpected %s after the end of the JSON document", quoteByte(c))
			}
		case stAfter:
			switch {
			case isSpace(c):
			case c == ',':
				s.comma = base + i
				if s.stack[len(s.stack)-1] == '{' {
					s.st = stObjNext
				} else {
					s.st = stArrNext
				}
			case c == '}' || c == ']':
				s.closeContainer(c, base+i)
			default:
				if s.stack[len(s.stack)-1] == '{' {
					s.fail(base+i, ErrUnexpected, "expected ',' or '}' after object member, found %s", quoteByte(c))
				} else {
					s.fail(base+i, ErrUnexpected, "expected ',' or ']' after array element, found %s", quoteByte(c))
				}
			}
		case stColon:
			switch {
			case isSpace(c):
			case c == ':':
				s.st = stValue
			default:
				s.fail(base+i, ErrUnexpected, "expected ':' after object key, found %s", quoteByte(c))
			}
		case stObjFirst, stObjNext:
			switch {
			case isSpace(c):
			case c == '"':
				s.inKey = true
				s.valStart = base + i
				s.st = stStr
				if s.h != nil {
					s.buf, s.bufOver = s.buf[:0], false
					s.capture(p[i : i+1])
				}
			case c == '}' && s.st == stObjFirst:
				s.closeContainer(c, base+i)
			case c == '}':
				s.fail(base+i, ErrTrailingComma, "trailing comma (at byte %d) before '}'", s.comma)
			case c == '\'':
				s.fail(base+i, ErrSingleQuote, "object keys must use double quotes, not single quotes")
			case c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
				s.fail(base+i, ErrUnquotedKey, "object keys must be double-quoted strings, found %s", quoteByte(c))
			default:
				s.fail(base+i, ErrUnexpected, "expected a double-quoted object key, found %s", quoteByte(c))
			}
		default: // stStart, stValue, stArrFirst, stArrNext
			switch {
			case isSpace(c):
			case c == ']' && s.st == stArrFirst:
				s.closeContainer(c, base+i)
			case c == ']' && s.st == stArrNext:
				s.fail(base+i, ErrTrailingComma, "trailing comma (at byte %d) before ']'", s.comma)
			default:
				s.beginValue(c, base+i)
				if s.h != nil && s.st != stFailed && c != '{' && c != '[' {
					s.capture(p[i : i+1])
				}
			}
		}
		if s.st == stFailed {
			s.off = base + len(p)
			return len(p), nil
		}
		i++
	}
	s.off = base + len(p)
	return len(p), nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func (s *Scanner) startUTF8(c byte, at int) {
	switch {
	case c >= 0xc2 && c <= 0xdf:
		s.u8Left, s.u8Lo, s.u8Hi = 1, 0x80, 0xbf
	case c == 0xe0:
		s.u8Left, s.u8Lo, s.u8Hi = 2, 0xa0, 0xbf
	case c >= 0xe1 && c <= 0xec, c == 0xee, c == 0xef:
		s.u8Left, s.u8Lo, s.u8Hi = 2, 0x80, 0xbf
	case c == 0xed:
		s.u8Left, s.u8Lo, s.u8Hi = 2, 0x80, 0x9f
	case c == 0xf0:
		s.u8Left, s.u8Lo, s.u8Hi = 3, 0x90, 0xbf
	case c >= 0xf1 && c <= 0xf3:
		s.u8Left, s.u8Lo, s.u8Hi = 3, 0x80, 0xbf
	case c == 0xf4:
		s.u8Left, s.u8Lo, s.u8Hi = 3, 0x80, 0x8f
	default:
		s.fail(at, ErrBadUTF8, "invalid UTF-8 in string (%s)", quoteByte(c))
		return
	}
	s.st = stStrUTF8
}

func (s *Scanner) capture(b []byte) {
	if s.bufOver {
		return
	}
	if len(s.buf)+len(b) > captureLimit {
		s.bufOver = true
		return
	}
	s.buf = append(s.buf, b...)
}

func (s *Scanner) raw() []byte {
	if s.bufOver {
		return nil
	}
	return s.buf
}

// beginValue handles the first byte of a value in a value position.
func (s *Scanner) beginValue(c byte, at int) {
	top := len(s.stack) == 0
	s.valStart = at
	if s.h != nil {
		s.buf, s.bufOver = s.buf[:0], false
	}
	var k Kind
	switch {
	case c == '{' || c == '[':
		if len(s.stack) >= s.maxDepth {
			s.fail(at, ErrTooDeep, "nesting deeper than %d", s.maxDepth)
			return
		}
		s.stack = append(s.stack, c)
		if c == '{' {
			s.st, k = stObjFirst, KindObject
		} else {
			s.st, k = stArrFirst, KindArray
		}
	case c == '"':
		s.inKey = false
		s.st, k = stStr, KindString
	case c == '-':
		s.st, k = stNumMinus, KindNumber
	case c == '0':
		s.st, k = stNumZero, KindNumber
	case c >= '1' && c <= '9':
		s.st, k = stNumInt, KindNumber
	case c == 't':
		s.st, s.lit, s.litIdx, k = stLit, "true", 1, KindBool
	case c == 'f':
		s.st, s.lit, s.litIdx, k = stLit, "false", 1, KindBool
	case c == 'n':
		s.st, s.lit, s.litIdx, k = stLit, "null", 1, KindNull
	case c == '\'':
		s.fail(at, ErrSingleQuote, "strings must use double quotes, not single quotes")
		return
	case c == 'N' || c == 'I':
		s.fail(at, ErrNonFinite, "NaN and Infinity are not JSON (use null or a string)")
		return
	case c == '`' && top && s.st == stStart:
		s.fail(at, ErrFence, "markdown code fence around the JSON document")
		return
	case top && s.st == stStart:
		s.fail(at, ErrProseBefore, "expected a JSON value, found text starting with %s", quoteByte(c))
		return
	case c == '.' || c == '+':
		s.fail(at, ErrBadNumber, "a number cannot start with %s", quoteByte(c))
		return
	case c == 'T' || c == 'F':
		s.fail(at, ErrBadLiteral, "invalid literal: JSON booleans are lowercase true and false")
		return
	default:
		s.fail(at, ErrUnexpected, "expected a value, found %s", quoteByte(c))
		return
	}
	if s.h != nil {
		s.h.BeginValue(k, at)
	}
}

// number advances the number state machine with c. It returns true when c
// belongs to the number, false when the number ended before c (or failed).
func (s *Scanner) number(c byte, at int) bool {
	digit := c >= '0' && c <= '9'
	switch s.st {
	case stNumMinus:
		switch {
		case c == '0':
			s.st = stNumZero
		case digit:
			s.st = stNumInt
		case c == 'I':
			s.fail(at, ErrNonFinite, "-Infinity is not JSON")
			return false
		default:
			s.fail(at, ErrBadNumber, "expected a digit after '-', found %s", quoteByte(c))
			return false
		}
		return true
	case stNumZero:
		switch {
		case c == '.':
			s.st = stNumDot
		case c == 'e' || c == 'E':
			s.st = stNumE
		case digit:
			s.fail(at, ErrBadNumber, "numbers cannot have leading zeros")
			return false
		default:
			s.endScalar(KindNumber, at)
			return false
		}
		return true
	case stNumInt:
		switch {
		case digit:
		case c == '.':
			s.st = stNumDot
		case c == 'e' || c == 'E':
			s.st = stNumE
		default:
			s.endScalar(KindNumber, at)
			return false
		}
		return true
	case stNumDot:
		if !digit {
			s.fail(at, ErrBadNumber, "expected a digit after the decimal point, found %s", quoteByte(c))
			return false
		}
		s.st = stNumFrac
		return true
	case stNumFrac:
		switch {
		case digit:
		case c == 'e' || c == 'E':
			s.st = stNumE
		default:
			s.endScalar(KindNumber, at)
			return false
		}
		return true
	case stNumE:
		switch {
		case c == '+' || c == '-':
			s.st = stNumESign
		case digit:
			s.st = stNumExp
		default:
			s.fail(at, ErrBadNumber, "expected a digit or sign in the exponent, found %s", quoteByte(c))
			return false
		}
		return true
	case stNumESign:
		if !digit {
			s.fail(at, ErrBadNumber, "expected a digit in the exponent, found %s", quoteByte(c))
			return false
		}
		s.st = stNumExp
		return true
	default: // stNumExp
		if digit {
			return true
		}
		s.endScalar(KindNumber, at)
		return false
	}
}

func (s *Scanner) endString(end int) {
	if s.inKey {
		s.inKey = false
		s.st = stColon
		if s.h != nil {
			s.h.Key(s.raw(), s.valStart, end)
		}
		return
	}
	s.endScalar(KindString, end)
}

func (s *Scanner) endScalar(k Kind, end int) {
	s.afterValue()
	if s.h != nil {
		s.h.EndValue(k, s.raw(), end)
	}
}

func (s *Scanner) afterValue() {
	if len(s.stack) == 0 {
		s.st = stDone
	} else {
		s.st = stAfter
	}
}

func (s *Scanner) closeContainer(c byte, at int) {
	open := s.stack[len(s.stack)-1]
	if (open == '{') != (c == '}') {
		s.fail(at, ErrUnexpected, "%s does not close the open %s", quoteByte(c), quoteByte(open))
		return
	}
	s.stack = s.stack[:len(s.stack)-1]
	s.afterValue()
	if s.h != nil {
		k := KindObject
		if c == ']' {
			k = KindArray
		}
		s.h.EndValue(k, nil, at+1)
	}
}

// Close marks the end of input and reports an unfinished document. It
// returns the first syntax error, or nil when the text is one complete
// JSON value.
func (s *Scanner) Close() *SyntaxError {
	if s.err != nil {
		return s.err
	}
	switch s.st {
	case stDone:
	case stNumZero, stNumInt, stNumFrac, stNumExp:
		if len(s.stack) == 0 {
			s.endScalar(KindNumber, s.off)
			break
		}
		s.fail(s.off, ErrUnterminated, "unexpected end of output: %d unclosed container(s)", len(s.stack))
	case stStart:
		s.fail(s.off, ErrEmpty, "empty output: expected a JSON value")
	case stStr, stStrEsc, stStrHex, stStrUTF8:
		s.fail(s.off, ErrUnterminated, "unexpected end of output inside a string")
	case stLit, stNumMinus, stNumDot, stNumE, stNumESign:
		s.fail(s.off, ErrUnterminated, "unexpected end of output inside a value")
	default:
		s.fail(s.off, ErrUnterminated, "unexpected end of output: %d unclosed container(s)", len(s.stack))
	}
	return s.err
}

// Check returns the first syntax error in b, or nil when b is exactly one
// JSON value (with optional surrounding whitespace).
func Check(b []byte) *SyntaxError {
	s := NewScanner(DefaultMaxDepth, nil)
	s.Write(b)
	return s.Close()
}

// Valid reports whether b is exactly one JSON value.
func Valid(b []byte) bool { return Check(b) == nil }
