// Package guardnats carries guard calls over NATS: gateways send each
// call as a request on the subject of the guard model
// (aegis.guard.<model>), guard workers answer it from a queue group, so
// any gateway can use any worker and a busy or dead worker is simply not
// asked.
//
// Requests of one response go to the worker that answered the first of
// them (on its own subject, aegis.guard.worker.<id>) while it lives, so
// that worker's server keeps the response's prompt warm in its cache; when
// it is gone (NATS answers "no responders" at once) or misses a deadline,
// the next call goes to the queue group again. While NATS is unreachable
// a call goes to the fallback judge (a local guard server) when there is
// one and fails at once otherwise, so the caller's fail-open or
// fail-closed rule applies without waiting for the deadline. A call
// waiting for its reply when the connection drops is treated the same
// way at that moment: its reply may be lost with the connection.
package guardnats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aegis-sentinel/aegis/internal/fleet"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/tracing"
)

// Subject names.
const (
	SubjectPrefix = "aegis.guard"
	// Queue is the queue group every worker of a model joins.
	Queue = "aegis-guard"
)

// Subject is the queue subject of a guard model.
func Subject(model string) string { return SubjectPrefix + "." + fleet.Token(model) }

// WorkerSubject is one worker's own subject.
func WorkerSubject(id string) string { return SubjectPrefix + ".worker." + fleet.Token(id) }

// ErrUnreachable is returned when NATS is unreachable and there is no
// fallback judge.
var ErrUnreachable = errors.New("guard workers unreachable: NATS is disconnected")

// errDropped is returned by request when the connection dropped while the
// call waited for its reply.
var errDropped = errors.New("NATS connection lost while waiting for the verdict")

// request is one guard call on the wire.
type request struct {
	llm.Judgement
	// Timeout is how long the caller still waits; the worker gives up
	// after it.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
}

// reply is a worker's answer.
type reply struct {
	Worker string      `json:"worker"`
	Result *llm.Result `json:"result,omitempty"`
	Error  string      `json:"error,omitempty"`
}

// Session is the remote judge of one response: it remembers the worker
// that answered, so the response's later calls go to it. Safe for
// concurrent use.
type Session struct {
	nc       *nats.Conn
	subject  string
	fallback llm.Judge

	mu     sync.Mutex
	worker string
}

// NewSession returns a judge that sends calls for model over nc, or to
// fallback (may be nil) while NATS is unreachable.
func NewSession(nc *nats.Conn, model string, fallback llm.Judge) *Session {
	return &Session{nc: nc, subject: Subject(model), fallback: fallback}
}

// Worker returns the worker the session sticks to ("" before the first
// answer or after it was lost).
func (s *Session) Worker() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.worker
}

// Judge sends j to the session's worker, else to the queue group.
func (s *Session) Judge(ctx context.Context, j llm.Judgement) (*llm.Result, error) {
	if !s.nc.IsConnected() {
		return s.unreachable(ctx, j, ErrUnreachable)
	}
	req := request{Judgement: j}
	if dl, ok := ctx.Deadline(); ok {
		req.Timeout = time.Until(dl)
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("guard over nats: %w", err)
	}
	if w := s.Worker(); w != "" {
		msg, err := s.request(ctx, WorkerSubject(w), data)
		if !errors.Is(err, nats.ErrNoResponders) {
			return s.answer(ctx, j, msg, err)
		}
		s.stick("") // the worker is gone: ask the group
	}
	msg, err := s.request(ctx, s.subject, data)
	if errors.Is(err, nats.ErrNoResponders) && s.fallback != nil {
		return s.fallback.Judge(ctx, j)
	}
	return s.answer(ctx, j, msg, err)
}

// answer turns what request returned into the call's result; a reply lost
// with the connection is answered as a call made while NATS is away.
func (s *Session) answer(ctx context.Context, j llm.Judgement, msg *nats.Msg, err error) (*llm.Result, error) {
	if errors.Is(err, errDropped) {
		s.stick("")
		return s.unreachable(ctx, j, fmt.Errorf("%w: %w", ErrUnreachable, err))
	}
	return s.decode(msg, err)
}

// unreachable answers a call NATS cannot carry: the fallback judge's
// verdict, or err at once.
func (s *Session) unreachable(ctx context.Context, j llm.Judgement, err error) (*llm.Result, error) {
	if s.fallback != nil {
		return s.fallback.Judge(ctx, j)
	}
	return nil, err
}

// request sends data to subject and waits for the reply, giving up with
// errDropped as soon as the connection drops (NATS does not carry a reply
// sent while the asking connection is away, so waiting on would only end
// at the deadline).
func (s *Session) request(ctx context.Context, subject string, data []byte) (*nats.Msg, error) {
	drop := s.nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	defer s.nc.RemoveStatusListener(drop)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dropped := make(chan struct{})
	go func() {
		select {
		case _, ok := <-drop:
			if ok {
				close(dropped)
				cancel()
			}
		case <-rctx.Done():
		}
	}()
	out := nats.NewMsg(subject)
	out.Data = data
	tracing.Inject(ctx, out.Header) // the worker joins the caller's trace
	msg, err := s.nc.RequestMsgWithContext(rctx, out)
	if err != nil && ctx.Err() == nil {
		select {
		case <-dropped:
			return nil, errDropped
		default:
		}
	}
	return msg, err
}

func (s *Session) stick(w string) {
	s.mu.Lock()
	s.worker = w
	s.mu.Unlock()
}

func (s *Session) decode(msg *nats.Msg, err error) (*llm.Result, error) {
	if err != nil {
		s.stick("") // a worker that missed a deadline is not asked again
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("guard over nats: no guard worker serves %s", s.subject)
		}
		return nil, fmt.Errorf("guard over nats: %w", err)
	}
	worker, res, err := parseReply(msg.Data)
	s.stick(worker)
	return res, err
}

// parseReply decodes a worker's reply: who answered, and its result or
// error. A result must carry a verdict; a prefill's reply carries none.
func parseReply(data []byte) (worker string, res *llm.Result, err error) {
	var r reply
	if err := json.Unmarshal(data, &r); err != nil {
		return "", nil, fmt.Errorf("guard over nats: bad reply: %w", err)
	}
	if r.Error != "" {
		return r.Worker, nil, fmt.Errorf("guard worker %s: %s", r.Worker, r.Error)
	}
	if r.Result != nil && r.Result.Verdict == nil {
		return r.Worker, nil, fmt.Errorf("guard worker %s: reply without a verdict", r.Worker)
	}
	return r.Worker, r.Result, nil
}

// parseRequest decodes a gateway's guard call.
func parseRequest(data []byte) (request, error) {
	var req request
	if err := json.Unmarshal(data, &req); err != nil {
		return request{}, fmt.Errorf("bad request: %w", err)
	}
	if req.Timeout < 0 {
		return request{}, fmt.Errorf("bad request: negative timeout")
	}
	return req, nil
}

var conns sync.Map // URL -> *nats.Conn, one per process

// Conn returns the process's connection to url, dialling it once. The
// connection reconnects by itself for the life of the process.
func Conn(url string, log *slog.Logger) (*nats.Conn, error) {
	if c, ok := conns.Load(url); ok {
		return c.(*nats.Conn), nil
	}
	nc, err := fleet.Connect(url, "aegis gateway", log)
	if err != nil {
		return nil, err
	}
	if c, loaded := conns.LoadOrStore(url, nc); loaded {
		nc.Close()
		return c.(*nats.Conn), nil
	}
	return nc, nil
}

var registered sync.Once

// Register makes guard_llm's nats setting work in this process: calls go
// to the guard workers of the configured model. Only the first call
// counts (its logger reports the connections' state).
func Register(log *slog.Logger) {
	registered.Do(func() { llm.Remote = remote(log) })
}

func remote(log *slog.Logger) func(c llm.Config, local llm.Judge) (llm.Judge, error) {
	return func(c llm.Config, local llm.Judge) (llm.Judge, error) {
		if c.Model == "" {
			return nil, errors.New("nats needs model: the guard workers' model name")
		}
		nc, err := Conn(c.NATS, log)
		if err != nil {
			return nil, err
		}
		return NewSession(nc, c.Model, local), nil
	}
}
