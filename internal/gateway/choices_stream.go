package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/sse"
)

// runChoicesStream serves a streaming request for n choices as n upstream
// requests of one choice, one after another, each through its own checks:
// their events go out on one stream, each chunk's choices carrying the
// choice's index and the first choice's id, as an n-choice stream does.
// A choice that halts ends the stream with its error event.
func (x *exchange) runChoicesStream(n int) {
	body := x.req.body.clone()
	delete(body, "n")
	cs := &choiceStream{w: x.w}
	outcome := events.OutcomeReleased
	for i := 0; i < n; i++ {
		res := &subResult{header: http.Header{}}
		iw := &choiceWriter{s: cs, index: i}
		req := x.req
		req.body = body
		sub := &exchange{g: x.g, w: iw, r: x.r, route: x.route, id: x.id, start: x.start, req: req, up: x.up, ended: &res.outcome}
		sub.run()
		x.tally.attempts += sub.tally.attempts
		iw.end()
		if !cs.started {
			// The first choice failed before its stream began: its plain
			// HTTP error is the answer.
			x.finished(res.outcome, iw.status)
			return
		}
		switch res.outcome {
		case events.OutcomeRepaired:
			outcome = events.OutcomeRepaired
		case events.OutcomeReleased:
		default:
			outcome = res.outcome
		}
		if outcome != events.OutcomeReleased && outcome != events.OutcomeRepaired {
			break
		}
	}
	cs.w.Write(sse.AppendDone(nil))
	if f, ok := cs.w.(http.Flusher); ok {
		f.Flush()
	}
	x.finished(outcome, http.StatusOK)
}

// choiceStream is the client's stream shared by the choices.
type choiceStream struct {
	w       http.ResponseWriter
	started bool
	id      string
}

// choiceWriter is one choice's view of the shared stream: the first
// status line goes out, the events are rewritten to the choice's index,
// its [DONE] is held for the end, and a plain error body written after the
// stream began is framed as an error event.
type choiceWriter struct {
	s      *choiceStream
	index  int
	status int
	buf    []byte
}

func (c *choiceWriter) Header() http.Header { return c.s.w.Header() }

func (c *choiceWriter) WriteHeader(code int) {
	if c.status != 0 {
		return
	}
	c.status = code
	if !c.s.started && code == http.StatusOK {
		c.s.started = true
		c.s.w.WriteHeader(code)
	} else if !c.s.started {
		c.s.w.WriteHeader(code) // an error before any stream: passed on as is
	}
}

func (c *choiceWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if c.status != http.StatusOK {
		if c.s.started {
			c.buf = append(c.buf, p...) // framed as an event in end
			return len(p), nil
		}
		return c.s.w.Write(p)
	}
	c.buf = append(c.buf, p...)
	for {
		i := bytes.Index(c.buf, []byte("\n\n"))
		if i < 0 {
			break
		}
		err := c.event(c.buf[:i])
		c.buf = c.buf[i+2:]
		if err != nil {
			return 0, err // the client left: the exchange stops
		}
	}
	return len(p), nil
}

// Unwrap gives http.ResponseController the client's writer, for the
// write deadlines.
func (c *choiceWriter) Unwrap() http.ResponseWriter { return c.s.w }

func (c *choiceWriter) Flush() {
	if f, ok := c.s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// event rewrites and forwards one SSE event.
func (c *choiceWriter) event(ev []byte) error {
	var lines []string
	for _, l := range strings.Split(string(ev), "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			lines = append(lines, d)
		}
	}
	payload := strings.Join(lines, "\n")
	if payload == "[DONE]" || payload == "" {
		return nil
	}
	var m rawBody
	if json.Unmarshal([]byte(payload), &m) == nil && m != nil {
		if _, ok := m["choices"]; ok {
			var choices []rawBody
			json.Unmarshal(m["choices"], &choices)
			for _, ch := range choices {
				ch.set("index", c.index)
			}
			m.set("choices", choices)
			var id string
			if json.Unmarshal(m["id"], &id) == nil && id != "" {
				if c.s.id == "" {
					c.s.id = id
				}
				m.set("id", c.s.id)
			}
			payload = string(m.encode())
		}
	}
	_, err := c.s.w.Write(sse.AppendData(nil, []byte(payload)))
	return err
}

// end forwards what the choice left: a plain error body written after the
// stream began goes out as an error event.
func (c *choiceWriter) end() {
	if c.status != http.StatusOK && c.s.started && len(c.buf) > 0 {
		c.s.w.Write(sse.AppendData(nil, bytes.TrimSpace(c.buf)))
	}
	c.buf = nil
	c.Flush()
}
