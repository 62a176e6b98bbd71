// Package sse frames streamed LLM responses incrementally: Server-Sent
// Events as llama-server and OpenAI-compatible servers send them, and the
// newline-delimited JSON that Ollama's native API sends. Readers hand out
// one event or line at a time without re-reading what came before; writers
// frame payloads for the client.
//
// It is hand-written because the framing is small and the gateway's hot
// path needs readers that reuse their buffers (no allocation per line for
// ordinary events) and that tolerate the variations real servers produce:
// CRLF or LF line ends, "data:" with or without a space, keep-alive comment
// frames (":"), and events split across arbitrary network reads.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxLine is the longest line a Reader accepts unless told
// otherwise: one streamed chunk carrying a large tool call or a long
// timings object fits easily.
const DefaultMaxLine = 1 << 20

// ErrLineTooLong is returned when a line exceeds the reader's limit.
var ErrLineTooLong = errors.New("sse: line too long")

// Event is one Server-Sent Event. Data joins the event's data lines with
// "\n", as the SSE standard says. Data is only valid until the next call
// to Next.
type Event struct {
	// Name is the "event:" field, empty for the default "message".
	Name string
	// Data is the event's data.
	Data []byte
	// ID is the "id:" field, if any.
	ID string
}

// Done reports whether the event is the OpenAI end-of-stream marker
// "[DONE]".
func (e *Event) Done() bool { return bytes.Equal(e.Data, doneMarker) }

var doneMarker = []byte("[DONE]")

// Reader reads Server-Sent Events incrementally.
type Reader struct {
	br      *bufio.Reader
	maxLine int
	data    []byte
	long    []byte
	ev      Event
}

// NewReader returns a Reader over r with DefaultMaxLine.
func NewReader(r io.Reader) *Reader { return NewReaderSize(r, DefaultMaxLine) }

// NewReaderSize returns a Reader that rejects lines longer than maxLine bytes.
func NewReaderSize(r io.Reader, maxLine int) *Reader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	rd := readerPool.Get().(*Reader)
	rd.br.Reset(r)
	rd.maxLine = maxLine
	return rd
}

// readBufferSize is the size of a reader's buffer: a network read of a
// fast stream brings many events at once.
const readBufferSize = 16 << 10

// readerPool holds released readers with their buffers, so that a stream
// costs no buffer allocation once a few have been read.
var readerPool = sync.Pool{New: func() any { return &Reader{br: bufio.NewReaderSize(nil, readBufferSize)} }}

// Release gives the reader and its buffers back for another stream; the
// reader, and any event or data it returned, must not be used after it.
func (r *Reader) Release() {
	r.br.Reset(nil)
	r.ev = Event{}
	r.data = keepSmall(r.data)
	r.long = keepSmall(r.long)
	readerPool.Put(r)
}

// keepSmall empties b, dropping it when a long line grew it: a pooled
// buffer should not pin a megabyte.
func keepSmall(b []byte) []byte {
	if cap(b) > 64<<10 {
		return nil
	}
	return b[:0]
}

// readLine returns the next line without its line end. The slice is
// valid until the next call. At end of input a final unterminated line
// is returned with io.EOF only when it is empty.
func readLine(br *bufio.Reader, long *[]byte, maxLine int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		*long = append((*long)[:0], line...)
		for err == bufio.ErrBufferFull {
			if len(*long) > maxLine {
				return nil, ErrLineTooLong
			}
			line, err = br.ReadSlice('\n')
			*long = append(*long, line...)
		}
		line = *long
	}
	if err != nil && !(err == io.EOF && len(line) > 0) {
		return nil, err
	}
	if len(line) > maxLine+2 {
		return nil, ErrLineTooLong
	}
	line = bytes.TrimSuffix(line, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	return line, nil
}

// Next returns the next event with a data field. Comment lines (keep-alive
// pings) and events without data are skipped. It returns io.EOF at the
// end of input; an unterminated last event is still returned first, so a
// caller that needs the "[DONE]" marker must check for it itself.
func (r *Reader) Next() (*Event, error) {
	r.data = r.data[:0]
	r.ev = Event{}
	hasData := false
	for {
		line, err := readLine(r.br, &r.long, r.maxLine)
		if err != nil {
			if err == io.EOF {
				if hasData {
					r.ev.Data = r.data
					return &r.ev, nil
				}
				return nil, io.EOF
			}
			return nil, fmt.Errorf("sse: %w", err)
		}
		if len(line) == 0 {
			if hasData {
				r.ev.Data = r.data
				return &r.ev, nil
			}
			r.ev = Event{}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if !hasData {
				// The common event, one data line whose blank line is
				// already buffered: its data is returned where it lies,
				// without a copy (consuming a buffered line moves nothing).
				if n := blankLineBuffered(r.br); n > 0 {
					r.br.Discard(n)
					r.ev.Data = value
					return &r.ev, nil
				}
			}
			if hasData {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			hasData = true
		case "event":
			r.ev.Name = string(value)
		case "id":
			r.ev.ID = string(value)
		}
	}
}

// blankLineBuffered returns the length of the blank line ("\n" or
// "\r\n") at the head of br's buffered data, 0 when there is none there.
func blankLineBuffered(br *bufio.Reader) int {
	b, _ := br.Peek(min(2, br.Buffered()))
	switch {
	case len(b) > 0 && b[0] == '\n':
		return 1
	case len(b) == 2 && b[0] == '\r' && b[1] == '\n':
		return 2
	}
	return 0
}

// LineReader reads newline-delimited JSON (Ollama's streams) one line at
// a time, skipping blank lines.
type LineReader struct {
	br      *bufio.Reader
	maxLine int
	long    []byte
}

// NewLineReader returns a LineReader over r with DefaultMaxLine.
func NewLineReader(r io.Reader) *LineReader { return NewLineReaderSize(r, DefaultMaxLine) }

// NewLineReaderSize returns a LineReader that rejects lines longer than maxLine.
func NewLineReaderSize(r io.Reader, maxLine int) *LineReader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	rd := lineReaderPool.Get().(*LineReader)
	rd.br.Reset(r)
	rd.maxLine = maxLine
	return rd
}

var lineReaderPool = sync.Pool{New: func() any { return &LineReader{br: bufio.NewReaderSize(nil, readBufferSize)} }}

// Release gives the reader and its buffers back for another stream; the
// reader, and any line it returned, must not be used after it.
func (r *LineReader) Release() {
	r.br.Reset(nil)
	r.long = keepSmall(r.long)
	lineReaderPool.Put(r)
}

// Next returns the next non-blank line, valid until the next call, or
// io.EOF at the end.
func (r *LineReader) Next() ([]byte, error) {
	for {
		line, err := readLine(r.br, &r.long, r.maxLine)
		if err != nil {
			if err == io.EOF {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("ndjson: %w", err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		return line, nil
	}
}

// AppendData appends one SSE data event carrying payload to dst. A payload
// with newlines becomes several data lines, so it round-trips.
func AppendData(dst, payload []byte) []byte {
	for {
		i := bytes.IndexByte(payload, '\n')
		dst = append(dst, "data: "...)
		if i < 0 {
			dst = append(dst, payload...)
			break
		}
		dst = append(dst, payload[:i]...)
		dst = append(dst, '\n')
		payload = payload[i+1:]
	}
	return append(dst, '\n', '\n')
}

// AppendDone appends the OpenAI end-of-stream event "data: [DONE]".
func AppendDone(dst []byte) []byte { return append(dst, "data: [DONE]\n\n"...) }

// AppendLine appends one NDJSON line (payload must not contain newlines;
// JSON encoders never produce them outside strings, where they are escaped).
func AppendLine(dst, payload []byte) []byte {
	dst = append(dst, payload...)
	return append(dst, '\n')
}
