package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/aegis-sentinel/aegis/internal/clock"
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
// stdin and stdout must be unset; its stderr is left as set). It returns
// when the client closed its input and the server exited, or when the
// server exited (every call in flight answered with an error first), or
// when ctx ends. If in is an io.Closer it is closed when the server exits
// first, so its reader ends too.
func (p *Proxy) RunStdio(ctx context.Context, in io.Reader, out io.Writer, cmd *exec.Cmd) error {
	sin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	sout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mcp: starting the server: %w", err)
	}
	err = p.Run(ctx, in, out, Conn{In: sin, Out: sout, Wait: func(outDone <-chan struct{}) error {
		return waitGrace(cmd, outDone, ShutdownGrace)
	}})
	if err != nil {
		return fmt.Errorf("mcp: the server %s: %w", p.Server, err)
	}
	return nil
}

// Conn is the server side of a stdio proxy: what to write the server's
// messages to, where to read its answers, and how to wait for it to end
// (given a channel closed once its output has been read to the end, or
// nil when it already has).
type Conn struct {
	In   io.WriteCloser
	Out  io.Reader
	Wait func(outDone <-chan struct{}) error
}

// Run proxies one client on in/out to the server on conn, newline-
// delimited JSON-RPC both ways, as RunStdio does for a process.
func (p *Proxy) Run(ctx context.Context, in io.Reader, out io.Writer, conn Conn) error {
	sin, sout := conn.In, conn.Out
	sess := p.NewSession()
	client := &lockedWriter{w: out}
	server := &lockedWriter{w: sin}
	sess.reply = func(b []byte) { server.send(b) }
	limit := p.Judge.Config.MaxMessageBytes

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	clientDone := make(chan struct{})
	serverDone := make(chan struct{})

	// client → server
	wg.Add(1)
	go func() {
		defer wg.Done()
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
	case <-ctx.Done():
		sin.Close()
		waitErr = conn.Wait(serverDone)
	}
	cancel()
	if c, ok := in.(io.Closer); ok {
		c.Close()
	}
	wg.Wait()
	return waitErr
}

func serverGoneText(err error) string {
	if err != nil {
		return "aegis: the MCP server exited before answering (" + err.Error() + ")"
	}
	return "aegis: the MCP server exited before answering"
}

// waitGrace waits for the server to exit, killing it after grace. When
// outDone is given it first waits for the server's output to end, so the
// answers it wrote before exiting are all read before Wait closes the
// pipe.
func waitGrace(cmd *exec.Cmd, outDone <-chan struct{}, grace time.Duration) error {
	t := time.NewTimer(grace)
	defer t.Stop()
	killed := false
	if outDone != nil {
		select {
		case <-outDone:
		case <-t.C:
			_ = cmd.Process.Kill()
			killed = true
			<-outDone
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if killed {
		return <-done
	}
	select {
	case err := <-done:
		return err
	case <-t.C:
		_ = cmd.Process.Kill()
		return <-done
	}
}
