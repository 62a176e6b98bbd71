// Package chunkscan finds, in one streamed chunk of an LLM server's answer,
// the few fields a streaming gateway must learn from it — the text, the
// tool-call deltas, the end of the answer, an in-band error and the
// answer's identity — in a single pass over the bytes, without reflection,
// maps or allocation.
//
// It reads three wire formats: OpenAI-compatible chat chunks
// (choices[0].delta.content and delta.tool_calls), text completions
// (choices[0].text), and Ollama's native chunks (response, message.content,
// message.tool_calls, done). Scan returns byte ranges into the chunk; text
// is unescaped only on request, into the caller's buffer (AppendString).
//
// A chunk is read exactly as encoding/json would read it into the structs a
// gateway declares for these formats: the whole chunk must be valid JSON
// (nesting at most 10,000 deep), member names match case-insensitively,
// the last of repeated members wins (objects merge), null leaves a string
// or number member as it was and clears an optional one, and a member of
// the wrong type is an error. The package's differential test holds it to
// that on every table and fuzz input.
package chunkscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// Format is the wire format of a stream's chunks.
type Format uint8

const (
	// Chat is an OpenAI-compatible chat.completion.chunk.
	Chat Format = iota
	// Completions is an OpenAI-compatible text_completion chunk.
	Completions
	// Ollama is one line of Ollama's native /api/chat or /api/generate stream.
	Ollama
)

func (f Format) String() string {
	switch f {
	case Chat:
		return "chat"
	case Completions:
		return "completions"
	case Ollama:
		return "ollama"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// Span is the byte range [Start, End) of a JSON value inside a chunk. A
// string's span includes its quotes. The zero Span means absent.
type Span struct{ Start, End int }

// Present reports whether the span holds a value.
func (s Span) Present() bool { return s.End > s.Start }

// Of returns the span's bytes in p.
func (s Span) Of(p []byte) []byte { return p[s.Start:s.End] }

// Fields is what Scan found in one chunk. String spans include the quotes;
// unescape them with AppendString.
type Fields struct {
	// Text is the chunk's text: choices[0].delta.content (Chat),
	// choices[0].text (Completions), or message.content, else response
	// (Ollama). Absent when missing or null.
	Text Span
	// Reasoning is the chunk's reasoning: choices[0].delta.reasoning_content,
	// else .reasoning (Chat); message.thinking, else thinking (Ollama).
	// Absent when missing or null.
	Reasoning Span
	// Usage says the chunk carries token counts or timings (usage,
	// timings; Ollama's eval counts); Progress that it reports work on the
	// prompt (llama-server's prompt_progress).
	Usage, Progress bool
	// ToolCalls is the raw JSON array of choices[0].delta.tool_calls (Chat)
	// or message.tool_calls (Ollama); ToolCallCount is its length.
	ToolCalls     Span
	ToolCallCount int
	// FunctionCall is the raw JSON of choices[0].delta.function_call, the
	// legacy single call (Chat).
	FunctionCall Span
	// FinishReason is choices[0].finish_reason, or Ollama's done_reason.
	FinishReason Span
	// Done is Ollama's done.
	Done bool
	// Error is the raw value of the chunk's "error" member (OpenAI: any
	// JSON value other than null; Ollama: a string).
	Error Span
	// ID, Model, Fingerprint (system_fingerprint), Created and CreatedAt
	// (Ollama's created_at) are the answer's identity.
	ID, Model, Fingerprint, CreatedAt Span
	Created                           int64
}

// Error is a chunk that is not valid JSON or holds a member of the wrong
// type.
type Error struct {
	Offset int
	What   string
}

func (e *Error) Error() string {
	return "chunk offset " + strconv.Itoa(e.Offset) + ": " + e.What
}

// scanner walks one chunk. Members of choice 0 and of Ollama's message
// are kept apart from Fields until the end, because which of them becomes
// the text depends on the format.
type scanner struct {
	p   []byte
	i   int
	f   Format
	out *Fields

	content, text Span // choice 0's delta.content and text
	reasoning     Span // choice 0's delta.reasoning_content
	reasoningAlt  Span // and its delta.reasoning (read when the other is absent)
	response      Span
	thinking      Span // Ollama's top-level thinking (generate)
	msgContent    Span
	msgThinking   Span
	msgPresent    bool
}

// Scan reads the chunk p in format f into out.
func Scan(f Format, p []byte, out *Fields) error {
	*out = Fields{}
	s := scanner{p: p, f: f, out: out}
	s.ws()
	if s.i >= len(p) {
		return s.fail("unexpected end of input")
	}
	var err error
	switch p[s.i] {
	case '{':
		if f == Ollama {
			err = s.ollamaTop()
		} else {
			err = s.openaiTop()
		}
	case 'n':
		err = s.literal("null")
	default:
		return s.fail("chunk is not a JSON object")
	}
	if err != nil {
		return err
	}
	s.ws()
	if s.i != len(p) {
		return s.fail("data after the chunk's JSON value")
	}
	switch f {
	case Chat:
		out.Text, out.Reasoning = s.content, s.reasoning
		if !out.Reasoning.Present() {
			out.Reasoning = s.reasoningAlt
		}
	case Completions:
		out.Text = s.text
	case Ollama:
		if s.msgPresent {
			out.Text, out.Reasoning = s.msgContent, s.msgThinking
		} else {
			out.Text, out.Reasoning = s.response, s.thinking
		}
	}
	return nil
}

func (s *scanner) fail(what string) error { return &Error{Offset: s.i, What: what} }

func (s *scanner) ws() {
	for s.i < len(s.p) {
		switch s.p[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the first byte of the next value, 0 at the end.
func (s *scanner) peek() byte {
	if s.i < len(s.p) && s.p[s.i] > ' ' { // no white space: the common case
		return s.p[s.i]
	}
	s.ws()
	if s.i >= len(s.p) {
		return 0
	}
	return s.p[s.i]
}

// enter consumes the opening bracket of a container at nesting depth.
func (s *scanner) enter(depth int) error {
	if depth > maxDepth {
		return s.fail("nesting too deep")
	}
	s.i++
	return nil
}

// member moves to the next member of an object and returns its name (raw,
// without quotes) and whether it has escapes; more is false at the
// closing brace.
func (s *scanner) member(first bool) (name []byte, escaped, more bool, err error) {
	c := s.peek()
	switch {
	case c == '}':
		s.i++
		return nil, false, false, nil
	case !first && c == ',':
		s.i++
		c = s.peek()
	case !first:
		return nil, false, false, s.fail("want , or } in object")
	}
	if c != '"' {
		return nil, false, false, s.fail("want a member name")
	}
	sp, esc, err := s.str()
	if err != nil {
		return nil, false, false, err
	}
	if s.peek() != ':' {
		return nil, false, false, s.fail("want : after a member name")
	}
	s.i++
	return s.p[sp.Start+1 : sp.End-1], esc, true, nil
}

// element moves to the next element of an array; more is false at the
// closing bracket.
func (s *scanner) element(first bool) (more bool, err error) {
	c := s.peek()
	switch {
	case c == ']':
		s.i++
		return false, nil
	case first:
		return true, nil
	case c == ',':
		s.i++
		return true, nil
	}
	return false, s.fail("want , or ] in array")
}

// plain marks the bytes a string holds as they are: all but the quote,
// the backslash and control characters.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Word-at-a-time masks: lsb has the low bit of every byte set, msb the
// high bit.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// stops flags, in the high bit of each byte of the little-endian word w,
// the bytes that end a run of plain string bytes: a quote, a backslash or
// a control character. Only the lowest flag is exact (a borrow may flag
// bytes above a true one), which is all str needs.
func stops(w uint64) uint64 {
	q := w ^ (lsb * '"')
	b := w ^ (lsb * '\\')
	return ((q-lsb)&^q | (b-lsb)&^b | (w-lsb*0x20)&^w) & msb
}

// str reads a string at s.i (at its opening quote) and returns its span.
func (s *scanner) str() (Span, bool, error) {
	p, start := s.p, s.i
	i := start + 1
	escaped := false
	for {
		// Skip the plain bytes eight at a time (most strings end within
		// a word or two), the last few one by one.
	run:
		for {
			if i+8 > len(p) {
				for i < len(p) && plain[p[i]] {
					i++
				}
				break run
			}
			if m := stops(binary.LittleEndian.Uint64(p[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break run
			}
			i += 8
		}
		if i >= len(p) {
			s.i = len(p)
			return Span{}, false, s.fail("unexpected end of input in a string")
		}
		switch c := p[i]; {
		case c == '"':
			s.i = i + 1
			return Span{start, s.i}, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(p) {
				s.i = len(p)
				return Span{}, false, s.fail("unexpected end of input in a string")
			}
			switch p[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(p) || hex4(p[i+2:i+6]) < 0 {
					s.i = i
					return Span{}, false, s.fail("bad \\u escape in a string")
				}
				i += 6
			default:
				s.i = i
				return Span{}, false, s.fail("bad escape in a string")
			}
		default: // a control character
			s.i = i
			return Span{}, false, s.fail("control character in a string")
		}
	}
}

func (s *scanner) literal(lit string) error {
	if len(s.p)-s.i < len(lit) || string(s.p[s.i:s.i+len(lit)]) != lit {
		return s.fail("bad literal")
	}
	s.i += len(lit)
	return nil
}

// number reads a JSON number and returns its span.
func (s *scanner) number() (Span, error) {
	start := s.i
	p := s.p
	digits := func() int {
		n := 0
		for s.i < len(p) && p[s.i] >= '0' && p[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(p) && p[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(p) && p[s.i] == '0':
		s.i++
	case digits() == 0:
		return Span{}, s.fail("bad number")
	}
	if s.i < len(p) && p[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return Span{}, s.fail("bad number")
		}
	}
	if s.i < len(p) && (p[s.i] == 'e' || p[s.i] == 'E') {
		s.i++
		if s.i < len(p) && (p[s.i] == '+' || p[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return Span{}, s.fail("bad number")
		}
	}
	return Span{start, s.i}, nil
}

// skip validates the next value, at nesting depth for a container.
func (s *scanner) skip(depth int) error {
	switch c := s.peek(); {
	case c == '{':
		if err := s.enter(depth); err != nil {
			return err
		}
		for first := true; ; first = false {
			_, _, more, err := s.member(first)
			if err != nil || !more {
				return err
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
		}
	case c == '[':
		if err := s.enter(depth); err != nil {
			return err
		}
		for first := true; ; first = false {
			more, err := s.element(first)
			if err != nil || !more {
				return err
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
		}
	case c == '"':
		_, _, err := s.str()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		_, err := s.number()
		return err
	case c == 0 && s.i >= len(s.p):
		return s.fail("unexpected end of input")
	}
	return s.fail("bad value")
}

// isNull consumes a null if one is next.
func (s *scanner) isNull() (bool, error) {
	if s.peek() != 'n' {
		return false, nil
	}
	return true, s.literal("null")
}

// stringOrNull reads a string member; null reports null.
func (s *scanner) stringOrNull() (sp Span, null bool, err error) {
	switch s.peek() {
	case '"':
		sp, _, err = s.str()
		return sp, false, err
	case 'n':
		return Span{}, true, s.literal("null")
	}
	return Span{}, false, s.fail("want a string")
}

// setString reads a string member into *dst; null leaves *dst as it was
// (a Go string member) or clears it (clear, an optional one).
func (s *scanner) setString(dst *Span, clear bool) error {
	sp, null, err := s.stringOrNull()
	switch {
	case err != nil:
		return err
	case !null:
		*dst = sp
	case clear:
		*dst = Span{}
	}
	return nil
}

// int64OrNull reads an integer member into *dst; null leaves it.
func (s *scanner) int64OrNull(dst *int64) error {
	switch c := s.peek(); {
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		sp, err := s.number()
		if err != nil {
			return err
		}
		n, ok := parseInt(sp.Of(s.p))
		if !ok {
			return s.fail("want an integer that fits 64 bits")
		}
		*dst = n
		return nil
	}
	return s.fail("want an integer")
}

// parseInt parses a JSON number as a 64-bit integer, as strconv.ParseInt
// would: no fraction, no exponent, no overflow.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (1<<64-1)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
		if u > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(u), true // -(1<<63) wraps to itself
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// lookup returns the index of name in names: an exact match, else one
// that matches ignoring case as encoding/json does (Unicode simple
// folding); -1 when none does.
func lookup(name []byte, escaped bool, names []string) int {
	if escaped {
		var buf [64]byte
		var ok bool
		if name, ok = unquoteInto(buf[:0], name); !ok || len(name) > len(buf) {
			return -1
		}
	}
	for i, n := range names {
		if string(name) == n {
			return i
		}
	}
	// The names are ASCII, and an ASCII name folds only to one of its own
	// length: the common unknown member ("object", "index") is ruled out
	// without a fold.
	ascii := true
	for _, c := range name {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	for i, n := range names {
		if (!ascii || len(n) == len(name)) && bytes.EqualFold(name, []byte(n)) {
			return i
		}
	}
	return -1
}

// hex4 decodes four hex digits, -1 when they are not.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// AppendString appends the unescaped text of the JSON string at span sp
// of p to dst, as encoding/json decodes it (invalid UTF-8 and lone
// surrogates become U+FFFD). An absent span appends nothing.
func AppendString(dst, p []byte, sp Span) []byte {
	if !sp.Present() {
		return dst
	}
	out, _ := unquoteInto(dst, p[sp.Start+1:sp.End-1])
	return out
}

// unquoteInto appends the unescaped form of the string body b (validated
// by str) to dst.
func unquoteInto(dst, b []byte) ([]byte, bool) {
	if bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b) {
		return append(dst, b...), true
	}
	for r := 0; r < len(b); {
		c := b[r]
		switch {
		case c == '\\':
			if r+1 >= len(b) {
				return dst, false
			}
			switch b[r+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				if r+6 > len(b) {
					return dst, false
				}
				rr := hex4(b[r+2 : r+6])
				if rr < 0 {
					return dst, false
				}
				r += 6
				if utf16.IsSurrogate(rr) {
					rr1 := rune(-1)
					if r+6 <= len(b) && b[r] == '\\' && b[r+1] == 'u' {
						rr1 = hex4(b[r+2 : r+6])
					}
					if dec := utf16.DecodeRune(rr, rr1); dec != utf8.RuneError {
						r += 6
						dst = utf8.AppendRune(dst, dec)
						continue
					}
					rr = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default:
				dst = append(dst, b[r+1])
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(b[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst, true
}
