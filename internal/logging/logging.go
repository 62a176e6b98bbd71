// Package logging sets up Aegis's structured logs (log/slog): JSON lines
// when stderr is not a terminal (a service manager, a file, a pipe), text
// for a person at a terminal; and a subscriber that writes exactly one line
// per request with its verdict.
//
// Prompts and outputs never reach the logs from here: the request line
// carries ids, routes, reasons, actions, offsets and timings only.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Format chooses the log encoding.
type Format int

// The formats. Auto picks Text on a terminal and JSON elsewhere.
const (
	Auto Format = iota
	JSON
	Text
)

func (f Format) String() string {
	switch f {
	case JSON:
		return "json"
	case Text:
		return "text"
	}
	return "auto"
}

// ParseFormat parses "auto", "json" or "text" (empty means auto).
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return Auto, nil
	case "json":
		return JSON, nil
	case "text":
		return Text, nil
	}
	return Auto, fmt.Errorf("unknown log format %q (want auto, json or text)", s)
}

// Options configure New. The zero value logs Info and above, format Auto.
type Options struct {
	Level  slog.Level
	Format Format
}

// New returns a logger writing to w.
func New(w io.Writer, o Options) *slog.Logger {
	ho := &slog.HandlerOptions{Level: o.Level}
	f := o.Format
	if f == Auto {
		f = JSON
		if IsTerminal(w) {
			f = Text
		}
	}
	if f == Text {
		return slog.New(slog.NewTextHandler(w, ho))
	}
	return slog.New(slog.NewJSONHandler(w, ho))
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// RequestLog writes one line per finished request, with the verdict that
// decided it, from the events on a bus.
type RequestLog struct {
	log  *slog.Logger
	sub  *events.Subscription
	reqs map[string]*reqState
}

type reqState struct {
	seen             time.Time
	model            string
	attempts         int
	retries          int
	verdict          *validator.Verdict
	retryReasons     []string
	guardCalls       int
	guardUnavailable bool
}

// NewRequestLog subscribes to bus; Run writes the lines.
func NewRequestLog(log *slog.Logger, bus *events.Bus) *RequestLog {
	return &RequestLog{log: log, sub: bus.Subscribe(4096), reqs: map[string]*reqState{}}
}

// Run logs until ctx is done, then unsubscribes.
func (r *RequestLog) Run(ctx context.Context) {
	defer r.sub.Close()
	for {
		select {
		case e, ok := <-r.sub.C:
			if !ok {
				return
			}
			r.Handle(e)
		case <-ctx.Done():
			return
		}
	}
}

// Handle applies one event; it logs on RequestFinished and GuardStatus.
func (r *RequestLog) Handle(e events.Event) {
	st := r.reqs[e.RequestID]
	if st == nil && e.Kind != events.GuardStatus && e.Kind != events.RequestFinished {
		st = &reqState{seen: e.Time}
		r.reqs[e.RequestID] = st
		if len(r.reqs) > 4096 { // finish events lost: forget the old ones
			for id, s := range r.reqs {
				if e.Time.Sub(s.seen) > time.Hour {
					delete(r.reqs, id)
				}
			}
		}
	}
	switch e.Kind {
	case events.RequestStarted:
		st.model = e.Model
	case events.AttemptStarted:
		st.attempts = max(st.attempts, e.Attempt)
	case events.Verdict:
		if e.GuardDevice != "" {
			st.guardCalls++
			if e.Error != "" {
				st.guardUnavailable = true
			}
			return
		}
		st.verdict = e.Verdict
	case events.Retry:
		st.retries++
		if e.Verdict != nil {
			st.retryReasons = append(st.retryReasons, string(e.Verdict.Reason))
		}
	case events.Halt, events.Flag:
		if e.Verdict != nil {
			st.verdict = e.Verdict
		}
	case events.GuardStatus:
		attrs := []any{"device", e.GuardDevice, "state", e.GuardState}
		if e.Upstream != "" {
			attrs = append(attrs, "child", e.Upstream)
		}
		level := slog.LevelInfo
		if e.Error != "" {
			attrs = append(attrs, "err", e.Error)
			level = slog.LevelWarn
		}
		r.log.Log(context.Background(), level, "guard status", attrs...)
	case events.RequestFinished:
		r.finished(e, st)
		delete(r.reqs, e.RequestID)
	}
}

func (r *RequestLog) finished(e events.Event, st *reqState) {
	if st == nil {
		st = &reqState{}
	}
	model := e.Model
	if model == "" {
		model = st.model
	}
	attrs := make([]slog.Attr, 0, 28) // room for every attribute: one allocation
	attrs = append(attrs,
		slog.String("request_id", e.RequestID),
		slog.String("route", e.Route),
		slog.String("upstream", e.Upstream),
		slog.String("model", model),
		slog.Bool("stream", e.Stream),
		slog.String("outcome", e.Outcome),
		slog.Int("status", e.Status),
	)
	verdict, reason, action := "pass", "", string(validator.ActionRelease)
	if v := st.verdict; v != nil {
		verdict, reason, action = string(v.Verdict), string(v.Reason), string(v.Action)
		if verdict == "" {
			verdict = "pass"
		}
		if len(v.Findings) > 0 {
			f := v.Findings[0]
			attrs = append(attrs, slog.Group("finding", "check", f.Check, "start", f.Start, "end", f.End))
		}
	}
	attrs = append(attrs, slog.String("verdict", verdict), slog.String("reason", reason), slog.String("action", action),
		slog.Int("attempts", max(st.attempts, 1)), slog.Int("retries", st.retries))
	if len(st.retryReasons) > 0 {
		attrs = append(attrs, slog.String("retry_reasons", strings.Join(st.retryReasons, ",")))
	}
	if st.guardCalls > 0 {
		attrs = append(attrs, slog.Int("guard_calls", st.guardCalls), slog.Bool("guard_unavailable", st.guardUnavailable))
	}
	attrs = append(attrs,
		slog.Float64("ttft_ms", ms(e.TTFT)),
		slog.Float64("added_ttft_ms", ms(e.AddedTTFT)),
		slog.Float64("verdict_delay_ms", ms(e.VerdictDelay)),
		slog.Float64("duration_ms", ms(e.Duration)),
		slog.Int("held_bytes", e.HeldBytes),
		slog.Int("tokens", e.Tokens),
	)
	level := slog.LevelInfo
	switch e.Outcome {
	case events.OutcomeHalted, events.OutcomeBlocked, events.OutcomeRejected:
		level = slog.LevelWarn
	}
	if e.Error != "" {
		attrs = append(attrs, slog.String("err", e.Error))
	}
	// The record goes to the handler directly: Logger.LogAttrs would also
	// walk the stack for a source position no handler here prints.
	ctx := context.Background()
	h := r.log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	rec := slog.NewRecord(time.Now(), level, "request", 0)
	rec.AddAttrs(attrs...)
	_ = h.Handle(ctx, rec)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
