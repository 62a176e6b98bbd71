package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

var lifeStart = time.Unix(1_000_000, 0)

// noLeaks checks, after the test's other cleanups (its servers), that
// the test left no goroutine behind. Reader goroutines waiting for the
// next reader are ended first: they are not leaks, but would otherwise
// linger for readerIdle.
func noLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		deadline := time.Now().Add(10 * time.Second)
		for {
			// A reader that was finishing when the last were ended
			// waits now: end it too before looking again.
			stopIdleReaders()
			err := goleak.Find(opt)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Error(err)
				return
			}
		}
	})
}

// stopIdleReaders ends the reader goroutines that wait for another reader.
func stopIdleReaders() {
	for {
		select {
		case idleReaders <- nil:
		default:
			return
		}
	}
}

// pacedUpstream serves chunks; with pace set, it waits for a value on it
// after each chunk (the test advances the fake clock in between). It
// reports, once it has written everything, whether its request was
// cancelled.
type pacedUpstream struct {
	chunks    []string
	pace      chan struct{}
	cancelled chan bool
}

func (p *pacedUpstream) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range p.chunks {
		w.Write([]byte("data: " + c + "\n\n"))
		w.(http.Flusher).Flush()
		if p.pace != nil {
			select {
			case <-p.pace:
			case <-r.Context().Done():
				p.cancelled <- true
				return
			}
		}
	}
	w.Write([]byte("data: [DONE]\n\n"))
	p.cancelled <- r.Context().Err() != nil
}

// guarded is a gateway with a scripted guard on a fake clock.
type guarded struct {
	gw     *Gateway
	read   chan struct{} // a payload was read from the upstream
	reads  atomic.Int64  // payloads read from the upstream
	loop   *loopWatch
	clk    *clock.Fake
	guards chan *validatortest.Guard
	url    string
}

func newGuarded(t *testing.T, up *pacedUpstream, policyDoc string, deadline time.Duration, failOpen bool, cadence int) *guarded {
	t.Helper()
	noLeaks(t)
	gd := &guarded{clk: clock.NewFake(lifeStart), guards: make(chan *validatortest.Guard, 8), read: make(chan struct{}, 1024),
		loop: newLoopWatch()}
	u := fakeUpstream(t, up.serve)
	g := &Gateway{Upstreams: []*upstream.Upstream{u}, Clock: gd.clk, IdleTimeout: time.Second,
		Policy: withCheck(mustPolicy(t, policyDoc), "guard_llm", func(*validator.Request) validator.Validator {
			g := validatortest.NewGuard(deadline, failOpen, cadence)
			gd.guards <- g
			return g
		}),
		readHook: func() { gd.reads.Add(1); gd.read <- struct{}{} }, waitHook: gd.loop.hook}
	gd.gw = g
	// A test that fails while the gateway still waits on the fake clock
	// must not hang in the server's Close: the first cleanup keeps the
	// fake time moving until the server is closed (cleanups run last
	// registered first), so the handler reaches its end and the failure
	// is reported instead of a hang.
	stopTicking := make(chan struct{})
	t.Cleanup(func() { close(stopTicking) })
	gd.url = start(t, g).URL
	t.Cleanup(func() {
		go func() {
			for {
				select {
				case <-stopTicking:
					return
				case <-time.After(5 * time.Millisecond):
					gd.clk.Advance(time.Minute)
				}
			}
		}()
	})
	return gd
}

type answer struct {
	status  int
	content string
	code    string
	verdict validator.Verdict
}

// ask posts a chat request in the background.
func (gd *guarded) ask(t *testing.T, stream bool) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		body := `{"messages":[{"role":"user","content":"tell"}],"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
		resp, err := http.Post(gd.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			out <- answer{}
			return
		}
		var a answer
		a.status = resp.StatusCode
		var m meta
		if stream {
			s := readStream(t, resp, false)
			a.content = s.content
			if s.errEv != nil {
				var e apiError
				json.Unmarshal(s.errEv["error"], &e)
				a.code = e.Code
				json.Unmarshal(s.errEv["aegis"], &m)
			} else {
				json.Unmarshal(s.last["aegis"], &m)
			}
		} else {
			var b struct {
				Choices []struct{ Message struct{ Content string } }
				Error   *apiError
				Aegis   meta
			}
			json.Unmarshal(readAllBody(t, resp), &b)
			if len(b.Choices) > 0 {
				a.content = b.Choices[0].Message.Content
			}
			if b.Error != nil {
				a.code = b.Error.Code
			}
			m = b.Aegis
		}
		a.verdict = m.Verdict
		out <- a
	}()
	return out
}

func storyChunks(n int) []string {
	out := []string{`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}`}
	for i := range n {
		out = append(out, chatChunk(strings.Repeat(string(rune('a'+i%26)), 7)+" "))
	}
	return append(out, finishChunk)
}

func receive[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(30 * time.Second): // a hang, not a timing assertion
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

// TestServeLateGuardFail: a guard "fail" that arrives after the
// upstream's last token halts the response, with verdicts while streaming
// and with one verdict at the end only (warm prefill), streaming or not.
func TestServeLateGuardFail(t *testing.T) {
	for _, stream := range []bool{true, false} {
		for _, cadence := range []int{0, 8} {
			t.Run(map[bool]string{true: "stream", false: "body"}[stream]+map[int]string{0: " prefill", 8: " cadence"}[cadence], func(t *testing.T) {
				up := &pacedUpstream{chunks: storyChunks(3), cancelled: make(chan bool, 1)}
				gd := newGuarded(t, up, "release: watermark\n", 2*time.Second, false, cadence)
				res := gd.ask(t, stream)
				g := receive(t, gd.guards, "guard")
				if cadence > 0 {
					receive(t, g.Calls, "first call").Pass() // "aaaaaaa " is fine
				}
				receive(t, up.cancelled, "upstream end")
				c := receive(t, g.Calls, "call on the tail")
				gd.clk.Advance(300 * time.Millisecond) // the verdict comes 0.3 s after the last token
				c.Fail()
				a := receive(t, res, "answer")
				if a.code != "aegis_unsafe_content" || a.verdict.Reason != validator.ReasonUnsafeContent {
					t.Fatalf("answer %+v, want a halt for unsafe_content", a)
				}
				if want := map[int]string{0: "", 8: "aaaaaaa "}[cadence]; stream && a.content != want {
					t.Fatalf("released %q, want %q", a.content, want)
				}
				if !stream && (a.status != HaltStatus(validator.ReasonUnsafeContent, validator.ActionHalt) || a.content != "") {
					t.Fatalf("body answer %+v", a)
				}
			})
		}
	}
}

// advanceToEnd moves the fake clock from timer to timer until the answer
// comes, never past limit. Before each step it waits until the gateway
// has taken in everything the upstream sent and waits again (an end of
// stream it just read disarms its idle timer and closes the checks), so
// the clock never jumps over something the gateway has still to see. The
// gateway's deadlines come from arrival times, not from when it got round
// to a timer, so jumping ahead is safe.
func (gd *guarded) advanceToEnd(t *testing.T, res <-chan answer, limit time.Time) (answer, time.Time) {
	t.Helper()
	clk := gd.clk
	waits := -1
	for {
		var a *answer
		if waits, a = gd.settle(t, res, waits); a != nil {
			return *a, clk.Now()
		}
		next, ok := time.Time{}, false
		for _, at := range clk.Timers() {
			if at.After(clk.Now()) && !at.After(limit) && (!ok || at.Before(next)) {
				next, ok = at, true
			}
		}
		if !ok {
			t.Fatalf("the gateway waits with no timer due by %s after the start and no answer (timers %v)",
				limit.Sub(lifeStart), clk.Timers())
		}
		clk.Set(next)
	}
}

// loopWatch follows the gateway's attempt loop through its waitHook: how
// many times it came back to wait, and where it was then.
type loopWatch struct {
	mu      sync.Mutex
	waits   int
	last    loopState
	changed chan struct{} // closed and replaced at each wait
}

func newLoopWatch() *loopWatch { return &loopWatch{changed: make(chan struct{})} }

func (w *loopWatch) hook(s loopState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waits++
	w.last = s
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *loopWatch) state() (waits int, last loopState, changed <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waits, w.last, w.changed
}

// String says where the loop was, for a failure message.
func (s loopState) String() string {
	ka := "none"
	if !s.keepAlive.IsZero() {
		ka = s.keepAlive.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%d payloads taken, ended %v, keep-alive %s", s.taken, s.ended, ka)
}

// until waits until the loop waits in a state for which ok holds.
func (w *loopWatch) until(t *testing.T, what string, ok func(loopState) bool) {
	t.Helper()
	for {
		_, last, changed := w.state()
		if ok(last) {
			return
		}
		select {
		case <-changed:
		case <-time.After(30 * time.Second): // a hang, not a timing assertion
			t.Fatalf("the gateway's loop never waited with %s (last: %v)", what, last)
		}
	}
}

// settle waits until the gateway's attempt loop waits again after its
// wait number after (-1: any), having taken in every payload the upstream
// reader queued so far, and returns that wait's number; or until the
// answer comes, which it returns instead. The tests using it make one
// attempt, so the reads and the loop's count are of the same reader.
func (gd *guarded) settle(t *testing.T, res <-chan answer, after int) (int, *answer) {
	t.Helper()
	for {
		waits, last, changed := gd.loop.state()
		taken := last.taken
		if waits > after && taken >= int(gd.reads.Load()) {
			return waits, nil
		}
		select {
		case a := <-res:
			return waits, &a
		case <-changed:
		case <-time.After(30 * time.Second): // a hang, not a timing assertion
			t.Fatalf("the gateway neither answered nor took in the %d payloads read (it took %d) at %s after the start",
				gd.reads.Load(), taken, gd.clk.Now().Sub(lifeStart))
		}
	}
}

// TestServeGuardPastDeadline: a guard ten times slower than the stream
// (it never answers) with a 2 s deadline, an upstream sending a chunk
// every 200 ms and an idle timeout of 1 s: never a stall, never a
// cancelled upstream; fail open releases every byte, fail closed halts
// with aegis_guard_unavailable, both within the stream's end + deadline +
// 100 ms.
func TestServeGuardPastDeadline(t *testing.T) {
	const deadline = 2 * time.Second
	for _, open := range []bool{true, false} {
		for _, stream := range []bool{true, false} {
			t.Run(map[bool]string{true: "open", false: "closed"}[open]+map[bool]string{true: " stream", false: " body"}[stream], func(t *testing.T) {
				chunks := storyChunks(20)
				up := &pacedUpstream{chunks: chunks, pace: make(chan struct{}, len(chunks)), cancelled: make(chan bool, 1)}
				doc := "release: watermark\nactions: {guard_unavailable: {action: halt, risk: medium}}\n"
				if open {
					doc = "release: watermark\n"
				}
				gd := newGuarded(t, up, doc, deadline, open, 8)
				res := gd.ask(t, stream)
				receive(t, gd.guards, "guard")
				// Every payload read, once the gateway has taken it in,
				// moves the upstream's time 200 ms on and lets it send the
				// next one.
				var early *answer
				waits := -1
				for reads := 0; reads <= len(chunks) && early == nil; {
					select {
					case <-gd.read:
						reads++
						if reads > len(chunks) {
							break
						}
						if waits, early = gd.settle(t, res, waits); early == nil {
							gd.clk.Advance(200 * time.Millisecond)
							up.pace <- struct{}{}
						}
					case a := <-res:
						early = &a
					case <-time.After(30 * time.Second): // a hang, not a timing assertion
						t.Fatal("the upstream was not read")
					}
				}
				end := gd.clk.Now()
				if early != nil {
					res = func() <-chan answer { c := make(chan answer, 1); c <- *early; return c }()
				} else if receive(t, up.cancelled, "upstream end") {
					t.Fatal("the upstream was cancelled")
				}
				a, at := gd.advanceToEnd(t, res, end.Add(deadline+100*time.Millisecond))
				if a.verdict.Reason == validator.ReasonStall || a.code == "aegis_stall" {
					t.Fatalf("a slow guard made a stall: %+v", a)
				}
				if at.Sub(end) > deadline+100*time.Millisecond {
					t.Fatalf("answered %s after the stream's end", at.Sub(end))
				}
				if open {
					if a.code != "" || a.content != allStory(20) {
						t.Fatalf("fail open: %+v", a)
					}
					return
				}
				if a.code != "aegis_guard_unavailable" || a.verdict.Reason != validator.ReasonGuardUnavailable {
					t.Fatalf("fail closed: %+v", a)
				}
			})
		}
	}
}

func allStory(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(string(rune('a'+i%26)), 7) + " ")
	}
	return b.String()
}

// blockingWriter is a client that stops reading: its first Write blocks
// until gate is closed.
type blockingWriter struct {
	mu      sync.Mutex
	h       http.Header
	b       strings.Builder
	gate    chan struct{}
	blocked chan struct{}
	once    sync.Once
}

func (w *blockingWriter) Header() http.Header { return w.h }
func (w *blockingWriter) WriteHeader(int)     {}
func (w *blockingWriter) Flush()              {}
func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.blocked); <-w.gate })
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestClientBlockedIsNotSilence: time the gateway spends blocked writing
// to a slow client is not upstream silence: the upstream keeps being read
// while the client does not read, and neither the idle timeout nor the
// stall check fires on the upstream's account.
func TestClientBlockedIsNotSilence(t *testing.T) {
	noLeaks(t)
	up := &pacedUpstream{chunks: storyChunks(100), pace: make(chan struct{}, 200), cancelled: make(chan bool, 1)}
	clk := clock.NewFake(lifeStart)
	read := make(chan struct{}, 1024)
	g := &Gateway{Upstreams: []*upstream.Upstream{fakeUpstream(t, up.serve)}, Clock: clk, IdleTimeout: time.Second,
		Policy:   mustPolicy(t, "release: optimistic\nchecks: {stall: {ttft: 2s, gap: 1s}, repetition: false}\n"),
		readHook: func() { read <- struct{}{} }}
	w := &blockingWriter{h: http.Header{}, gate: make(chan struct{}), blocked: make(chan struct{})}
	r, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"x"}],"stream":true}`))
	done := make(chan struct{})
	go func() { g.ServeHTTP(w, r); close(done) }()
	receive(t, w.blocked, "first write")
	for reads := 0; reads <= len(up.chunks); reads++ { // 20 s of upstream time while the client reads nothing
		receive(t, read, "payload read")
		clk.Advance(200 * time.Millisecond)
		up.pace <- struct{}{}
	}
	if receive(t, up.cancelled, "upstream end") {
		t.Fatal("the upstream was cancelled while the client was blocked")
	}
	close(w.gate)
	receive(t, done, "the end of the request")
	s := w.b.String()
	if strings.Contains(s, `"error"`) || !strings.Contains(s, "[DONE]") {
		t.Fatalf("the response stalled or did not end:\n%s", s)
	}
	if n := strings.Count(s, `"content":"`); n < 100 {
		t.Fatalf("%d chunks reached the client, want 100:\n%s", n, s)
	}
}

// TestServeOptimisticLateFail: with release: optimistic the text goes out
// before the guard's verdict; a late "fail" becomes the in-band error and
// a halt event (an incident), never a retry.
func TestServeOptimisticLateFail(t *testing.T) {
	up := &pacedUpstream{chunks: storyChunks(3), cancelled: make(chan bool, 1)}
	gd := newGuarded(t, up, "release: optimistic\n", 2*time.Second, false, 0)
	bus := &events.Bus{Clock: gd.clk}
	sub := bus.Subscribe(64)
	defer sub.Close()
	gd.gw.Events = bus
	res := gd.ask(t, true)
	g := receive(t, gd.guards, "guard")
	receive(t, up.cancelled, "upstream end")
	receive(t, g.Calls, "call on the whole text").Fail()
	a := receive(t, res, "answer")
	if a.content != allStory(3) || a.code != "aegis_unsafe_content" {
		t.Fatalf("answer %+v: want the whole text, then the error", a)
	}
	var halts, retries int
	for len(sub.C) > 0 {
		switch (<-sub.C).Kind {
		case events.Halt:
			halts++
		case events.Retry:
			retries++
		}
	}
	if halts != 1 || retries != 0 {
		t.Fatalf("%d halts, %d retries; want one halt", halts, retries)
	}
}
