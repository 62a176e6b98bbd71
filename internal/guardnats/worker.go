package guardnats

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-sentinel/aegis/internal/fleet"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/tracing"
)

// Worker serves guard calls for one model from the queue group and from
// its own subject, running each on its judge (a client of its guard
// server), at most Concurrency at a time. It announces itself to the
// fleet with its measured time to verdict.
type Worker struct {
	NC     *nats.Conn
	ID     string
	Model  string
	Device func() string // the device its guard server runs on now, as announced
	Judge  llm.Judge     // asks the guard server
	// Concurrency bounds the calls run at once (the server's slots);
	// zero means 4. Further requests wait in NATS, not here.
	Concurrency int
	// MaxTimeout bounds a call whose request carries no timeout; zero
	// means 10 s.
	MaxTimeout time.Duration
	Log        *slog.Logger
	// LogVerdicts logs every verdict sent with the response it judged
	// (the gateway's request id and attempt; never the text).
	LogVerdicts bool

	started  time.Time
	calls    atomic.Uint64
	errors   atomic.Uint64
	inFlight atomic.Int64
	mu       sync.Mutex
	lat      []time.Duration // ring of recent times to verdict
	next     int
}

// latencyRing is how many recent verdict times the percentiles cover.
const latencyRing = 512

// Run serves until ctx ends, then stops taking requests and waits for the
// calls in flight.
func (w *Worker) Run(ctx context.Context) error {
	if w.Concurrency <= 0 {
		w.Concurrency = 4
	}
	if w.MaxTimeout <= 0 {
		w.MaxTimeout = 10 * time.Second
	}
	if w.Log == nil {
		w.Log = slog.Default()
	}
	w.started = time.Now()
	sem := make(chan struct{}, w.Concurrency)
	var wg sync.WaitGroup
	handle := func(m *nats.Msg) {
		sem <- struct{}{} // NATS holds further messages of this subscription meanwhile
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			w.serve(ctx, m)
		}()
	}
	q, err := w.NC.QueueSubscribe(Subject(w.Model), Queue, handle)
	if err != nil {
		return fmt.Errorf("guard worker: %w", err)
	}
	own, err := w.NC.Subscribe(WorkerSubject(w.ID), handle)
	if err != nil {
		q.Unsubscribe()
		return fmt.Errorf("guard worker: %w", err)
	}
	actx, stop := context.WithCancel(context.Background())
	defer stop()
	if err := fleet.Announce(actx, w.NC, w.Member); err != nil {
		q.Unsubscribe()
		own.Unsubscribe()
		return err
	}
	w.NC.Flush()
	w.Log.Info("guard worker serving", "subject", Subject(w.Model), "own_subject", WorkerSubject(w.ID), "device", w.device())
	<-ctx.Done()
	q.Unsubscribe()
	own.Unsubscribe()
	wg.Wait()
	return nil
}

func (w *Worker) serve(ctx context.Context, m *nats.Msg) {
	w.inFlight.Add(1)
	defer w.inFlight.Add(-1)
	rep := reply{Worker: w.ID}
	req, err := parseRequest(m.Data)
	if err != nil {
		rep.Error = err.Error()
	} else {
		timeout := w.MaxTimeout
		if req.Timeout > 0 {
			timeout = min(timeout, req.Timeout)
		}
		// The call joins the trace of the gateway's request when the
		// message carries one.
		sctx, span := tracing.WorkerSpan(ctx, m.Header, tracing.KeyRequestID.String(req.RequestID),
			tracing.KeyAttempt.Int(req.Attempt), attribute.String("aegis.guard.worker", w.ID), attribute.Bool("aegis.guard.prefill", req.Prefill))
		cctx, cancel := context.WithTimeout(sctx, timeout)
		start := time.Now()
		res, err := w.Judge.Judge(cctx, req.Judgement)
		cancel()
		endWorkerSpan(span, res, err)
		w.calls.Add(1)
		if err != nil {
			w.errors.Add(1)
			rep.Error = err.Error()
		} else {
			rep.Result = res
			if !req.Prefill {
				w.record(time.Since(start))
			}
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		w.Log.Error("guard worker: encode reply", "err", err)
		return
	}
	m.Respond(b)
	if w.LogVerdicts && rep.Result != nil && rep.Result.Verdict != nil {
		w.logVerdict(req, rep.Result)
	}
}

// logVerdict records a verdict the worker sent, with the response it
// judged and the length of the text judged, once NATS has it: delivered
// is false when the connection could not confirm it (NATS went away
// meanwhile), so the gateway may never have seen it.
func (w *Worker) logVerdict(req request, res *llm.Result) {
	delivered := w.NC.FlushTimeout(time.Second) == nil
	w.Log.Info("guard worker verdict", "request_id", req.RequestID, "attempt", req.Attempt, "bytes", len(req.Text),
		"verdict", string(res.Verdict.Verdict), "reason", string(res.Verdict.Reason), "delivered", delivered)
}

func (w *Worker) record(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.lat) < latencyRing {
		w.lat = append(w.lat, d)
		return
	}
	w.lat[w.next] = d
	w.next = (w.next + 1) % latencyRing
}

// percentiles returns the median and 99th percentile of the recent
// verdict times.
func (w *Worker) percentiles() (p50, p99 time.Duration) {
	w.mu.Lock()
	s := slices.Clone(w.lat)
	w.mu.Unlock()
	if len(s) == 0 {
		return 0, 0
	}
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}

// Member is the worker's announcement.
func (w *Worker) Member() fleet.Member {
	p50, p99 := w.percentiles()
	return fleet.Member{Role: fleet.RoleGuardWorker, ID: w.ID, Host: fleet.Hostname(), Started: w.started,
		Model: w.Model, Subject: Subject(w.Model), Device: w.device(), VerdictP50: p50, VerdictP99: p99,
		Calls: w.calls.Load(), Errors: w.errors.Load(), InFlight: int(w.inFlight.Load())}
}

func (w *Worker) device() string {
	if w.Device == nil {
		return ""
	}
	return w.Device()
}

func endWorkerSpan(span trace.Span, res *llm.Result, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else if res != nil && res.Verdict != nil {
		span.SetAttributes(tracing.KeyVerdict.String(string(res.Verdict.Verdict)), tracing.KeyReason.String(string(res.Verdict.Reason)))
	}
	span.End()
}
