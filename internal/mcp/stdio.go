package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/llamaproc"
	"github.com/aegis-sentinel/aegis/internal/reaper"
)

// lockedWriter writes whole messages, one at a time, each with a newline.
type lockedWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

func (l *lockedWriter) send(msgs ...[]byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		if m == nil || l.err != nil {
			continue
		}
		buf := make([]byte, 0, len(m)+1)
		buf = append(append(buf, m...), '\n')
		_, l.err = l.w.Write(buf)
	}
	return l.err
}

// ShutdownGrace is how long the server may take to exit after its input
// closed before it is killed.
var ShutdownGrace = 5 * time.Second

// RunStdio proxies one client on in/out to the server cmd starts (its
// stdin and stdout must be unset; its stderr is left as set). The server
// runs in a process group of its own; with p.Reaper set (Linux), under a
// reaper (internal/reaper) that stops the server and everything it
// started should Aegis die, even by SIGKILL. It returns when the client
// closed its input and the server exited, or when the server exited
// (every call in flight answered with an error first), or when ctx ends
// (a signal: the calls in flight are answered with an error and the
// server's process group and descendants are stopped as llamaproc stops
// its servers). If in is an io.Closer it is closed when the server exits
// first, so its reader ends too. A server that fails to start gets every
// client request answered with a JSON-RPC error until the client closes
// its input.
func (p *Proxy) RunStdio(ctx context.Context, in io.Reader, out io.Writer, cmd *exec.Cmd) error {
	sin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	sout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	proc, err := reaper.Start(cmd, p.Reaper, ShutdownGrace)
	if err != nil {
		err = fmt.Errorf("mcp: starting the server: %w", err)
		p.refuseAll(ctx, in, out, err)
		return err
	}
	sp := &stdioProcess{Process: proc, done: make(chan struct{})}
	// A reaper stops the server within ShutdownGrace itself; it is given
	// that long again before it is killed.
	stopGrace := ShutdownGrace
	kill := func() { _ = proc.Signal(syscall.SIGKILL) }
	if proc.Reaped() {
		stopGrace = 2 * ShutdownGrace
		kill = func() { go llamaproc.Stop(sp, stopGrace) }
	}
	err = p.Run(ctx, in, out, Conn{In: sin, Out: sout,
		Wait: func(outDone <-chan struct{}) error {
			defer close(sp.done)
			return waitGrace(proc.Wait, kill, outDone, ShutdownGrace)
		},
		Stop: func() { llamaproc.Stop(sp, stopGrace) },
	})
	if err != nil {
		return fmt.Errorf("mcp: the server %s: %w", p.Server, err)
	}
	return nil
}

// stdioProcess is the server's process (or its reaper) as llamaproc.Stop
// sees it: its group is signalled, Done closes once RunStdio has reaped
// it.
type stdioProcess struct {
	*reaper.Process
	done chan struct{}
}

func (s *stdioProcess) Done() <-chan struct{} { return s.done }
func (s *stdioProcess) Err() error            { return nil }
func (s *stdioProcess) Signal(sig syscall.Signal) error {
	err := s.Process.Signal(sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// refuseAll answers every request the client sends with err, as a
// JSON-RPC error, until its input ends or ctx does.
func (p *Proxy) refuseAll(ctx context.Context, in io.Reader, out io.Writer, err error) {
	client := &lockedWriter{w: out}
	lr := NewLineReader(in, p.Judge.Config.MaxMessageBytes)
	msg := "aegis: the MCP server " + p.Server + " did not start: " + err.Error()
	for ctx.Err() == nil {
		line, err := lr.Next()
		var tl *LineTooLongError
		switch {
		case errors.As(err, &tl):
			client.send(ErrorResponse(tl.IDHint(), CodeServerGone, msg, nil))
			continue
		case err != nil:
			return
		}
		m, derr := Decode(line)
		switch {
		case derr != nil:
			client.send(ErrorResponse(lenientID(line), Code(derr), "aegis: malformed JSON-RPC message from the client: "+derr.Error(), nil))
		case m.Kind == KindRequest:
			client.send(ErrorResponse(m.ID, CodeServerGone, msg, nil))
		}
	}
}

// Conn is the server side of a stdio proxy: what to write the server's
// messages to, where to read its answers, and how to wait for it to end
// (given a channel closed once its output has been read to the end, or
// nil when it already has).
type Conn struct {
	In   io.WriteCloser
	Out  io.Reader
	Wait func(outDone <-chan struct{}) error
	// Stop, when set, stops the server at once (ctx ended: a signal);
	// Wait still reaps it.
	Stop func()
}

// Run proxies one client on in/out to the server on conn, newline-
// delimited JSON-RPC both ways, as RunStdio does for a process.
func (p *Proxy) Run(ctx context.Context, in io.Reader, out io.Writer, conn Conn) error {
	sin, sout := conn.In, conn.Out
	sess := p.NewSession()
	sess.canElicit = true // the client's pipe carries Aegis's own requests too
	client := &lockedWriter{w: out}
	server := &lockedWriter{w: sin}
	sess.reply = func(b []byte) { server.send(b) }
	limit := p.Judge.Config.MaxMessageBytes

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	clientDone := make(chan struct{})
	serverDone := make(chan struct{})

	// client → server (not in wg: a reader blocked on a terminal is not
	// waited for when a signal ends the proxy)
	go func() {
		defer close(clientDone)
		lr := NewLineReader(in, limit)
		for {
			line, err := lr.Next()
			var tl *LineTooLongError
			switch {
			case errors.As(err, &tl):
				client.send(ErrorResponse(tl.IDHint(), jsonrpc.CodeInvalidRequest, "aegis: "+tl.Error()+" (max_message_bytes)", nil))
				continue
			case err != nil:
				return
			}
			up, back := sess.FromClient(ctx, line)
			if up != nil {
				server.send(up)
			}
			if back != nil {
				client.send(back)
			}
		}
	}()

	// server → client
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(serverDone)
		lr := NewLineReader(sout, max(limit, p.Judge.Config.MaxResultBytes+keepBytes))
		for {
			line, err := lr.Next()
			var tl *LineTooLongError
			switch {
			case errors.As(err, &tl):
				p.Judge.Log.Warn("mcp: dropped a message from the server over the size limit", "server", p.Server, "bytes", tl.Size)
				if id := tl.IDHint(); id != nil {
					sess.forget(string(id))
					client.send(ErrorResponse(id, CodeServerGone, "aegis: the server's answer is over the size limit: "+tl.Error(), nil))
				}
				continue
			case err != nil:
				return
			}
			if msg := sess.FromServer(ctx, line); msg != nil {
				client.send(msg)
			}
		}
	}()

	// timeouts: a timer on the proxy's clock at the earliest deadline,
	// re-armed when a call starts or ends.
	wg.Add(1)
	go func() {
		defer wg.Done()
		clk := clock.Or(p.Clock)
		for {
			var fire <-chan time.Time
			var t clock.Timer
			if d, ok := sess.nextDeadline(); ok {
				t = clk.NewTimer(max(d.Sub(clk.Now()), 0))
				fire = t.C()
			}
			select {
			case <-fire:
				back, up := sess.Expire(clk.Now())
				server.send(up...)
				client.send(back...)
			case <-sess.wake:
			case <-serverDone:
			case <-ctx.Done():
			}
			if t != nil {
				t.Stop()
			}
			select {
			case <-serverDone:
				return
			case <-ctx.Done():
				return
			default:
			}
		}
	}()

	var waitErr error
	select {
	case <-clientDone: // the client went away: let the server finish and exit
		sin.Close()
		waitErr = conn.Wait(serverDone)
	case <-serverDone: // the server exited or closed its output
		waitErr = conn.Wait(nil)
		client.send(sess.Abort(CodeServerGone, serverGoneText(waitErr))...)
		if c, ok := in.(io.Closer); ok {
			c.Close()
		}
		sin.Close()
	case <-ctx.Done(): // a signal: answer what is in flight, stop the server
		client.send(sess.Abort(CodeServerGone, "aegis: shutting down: the call was not answered")...)
		sin.Close()
		if conn.Stop != nil {
			go conn.Stop()
		}
		_ = conn.Wait(serverDone) // its exit status is the stop's doing
		cancel()
		if c, ok := in.(io.Closer); ok {
			c.Close()
		}
		wg.Wait()
		return nil
	}
	cancel()
	if c, ok := in.(io.Closer); ok {
		c.Close()
	}
	// The client's reader is not waited for: when the server exited
	// first, a reader blocked on a terminal or a pipe would hold the proxy
	// (and a signal to it) until the client closed its input.
	wg.Wait()
	return waitErr
}

func serverGoneText(err error) string {
	if err != nil {
		return "aegis: the MCP server exited before answering (" + err.Error() + ")"
	}
	return "aegis: the MCP server exited before answering"
}

// waitGrace waits (wait) for the server to exit, calling kill after
// grace. When outDone is given it first waits for the server's output to
// end, so the answers it wrote before exiting are all read before wait
// closes the pipe.
func waitGrace(wait func() error, kill func(), outDone <-chan struct{}, grace time.Duration) error {
	t := time.NewTimer(grace)
	defer t.Stop()
	killed := false
	if outDone != nil {
		select {
		case <-outDone:
		case <-t.C:
			kill()
			killed = true
			<-outDone
		}
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	if killed {
		return <-done
	}
	select {
	case err := <-done:
		return err
	case <-t.C:
		kill()
		return <-done
	}
}
