package upstream

import (
	"errors"
	"fmt"
	"io"

	"github.com/aegis-sentinel/aegis/internal/sse"
)

// ErrTruncated is returned by Stream.Next when an SSE stream ended without
// the "[DONE]" marker: the server died or the connection broke mid-answer.
var ErrTruncated = errors.New("stream ended without [DONE]")

// Stream reads the JSON payloads of one streamed response, SSE
// ("data: {...}" events ending with "data: [DONE]") or NDJSON (one object
// per line, the last with "done": true). It reads to the real end of the
// stream, past the chunk carrying finish_reason, so the usage and timings
// chunks that follow it are not lost.
type Stream struct {
	body  io.ReadCloser
	in    countingReader // body, counting its reads
	sse   *sse.Reader
	lines *sse.LineReader
	done  bool
	// ended: the stream read its last event (or the end of an NDJSON
	// body), not an error.
	ended bool
	// final, when set, names the events that end an SSE stream that has
	// no "[DONE]" marker (Anthropic's Messages, OpenAI's Responses).
	final func(name string, data []byte) bool
	// last is the stream's last event, for the error of a truncated one.
	last string
}

// countingReader counts the reads of the body: payloads that Next returns
// between two reads came in the same one.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// NewSSEStream reads body as Server-Sent Events.
func NewSSEStream(body io.ReadCloser) *Stream {
	s := &Stream{body: body, in: countingReader{r: body}}
	s.sse = sse.NewReader(&s.in)
	return s
}

// NewEventStream reads body as Server-Sent Events that end with an event
// of their own rather than "[DONE]": final reports whether the event
// name (its "event:" field, or "" when absent) with payload data is the
// last one. A "[DONE]" marker also ends it.
func NewEventStream(body io.ReadCloser, final func(name string, data []byte) bool) *Stream {
	s := NewSSEStream(body)
	s.final = final
	return s
}

// NewNDJSONStream reads body as newline-delimited JSON.
func NewNDJSONStream(body io.ReadCloser) *Stream {
	s := &Stream{body: body, in: countingReader{r: body}}
	s.lines = sse.NewLineReader(&s.in)
	return s
}

// Reads returns how many times the stream has read its body so far. A
// payload that Next returns without the count moving was already read,
// with the one before it: a caller that stamps payloads with their
// arrival can reuse that one's stamp instead of reading the clock again.
func (s *Stream) Reads() int { return s.in.reads }

// Next returns the next payload, valid until the following call. It
// returns io.EOF after "[DONE]" (SSE) or at the end of the body (NDJSON),
// and ErrTruncated when an SSE body ends without "[DONE]".
func (s *Stream) Next() ([]byte, error) {
	if s.done {
		return nil, io.EOF
	}
	if s.lines != nil {
		l, err := s.lines.Next()
		if err == io.EOF {
			s.done, s.ended = true, true
		}
		return l, err
	}
	ev, err := s.sse.Next()
	if err == io.EOF {
		if s.final != nil {
			return nil, fmt.Errorf("upstream: %w (the last event was %q)", ErrTruncated, s.last)
		}
		return nil, fmt.Errorf("upstream: %w", ErrTruncated)
	}
	if err != nil {
		return nil, err
	}
	if s.final != nil {
		s.last = ev.Name
		if s.final(ev.Name, ev.Data) {
			s.done, s.ended = true, true // the payload is returned; the next call ends
		}
	}
	if ev.Name == "error" {
		data := ev.Data
		if len(data) > 300 {
			data = data[:300]
		}
		return nil, fmt.Errorf("upstream sent an error event: %q", data)
	}
	if ev.Done() {
		s.done, s.ended = true, true
		return nil, io.EOF
	}
	return ev.Data, nil
}

// Ended reports whether the stream read its last event ("[DONE]", the
// final event of a named-event stream, the end of an NDJSON body) rather
// than stopping at an error.
func (s *Stream) Ended() bool { return s.ended }

// Drain reads and discards what the body holds after the stream's last
// event, at most limit bytes, and reports whether it reached the body's
// end. Go's HTTP client puts a connection back in its pool only when the
// body was read to its end: a stream closed right after "[DONE]", before
// the end of its chunked body, costs the next request a new connection
// (a few hundred microseconds of its time to first token). Drain blocks
// until the server ends the body: bound it with the request's context.
func (s *Stream) Drain(limit int64) bool {
	n, err := io.Copy(io.Discard, io.LimitReader(s.body, limit+1))
	return err == nil && n <= limit
}

// Close closes the body and gives the framing buffers back; no payload
// Next returned may be used after it. Closing before the end aborts the
// request, which makes llama-server and Ollama stop generating.
func (s *Stream) Close() error {
	err := s.body.Close()
	if s.sse != nil {
		s.sse.Release()
		s.sse = nil
	}
	if s.lines != nil {
		s.lines.Release()
		s.lines = nil
	}
	s.done = true
	return err
}
