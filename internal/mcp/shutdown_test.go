package mcp

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
)

// hangingUpstream answers nothing: a POST either waits (json) or opens an
// event stream with one resumable event and waits. Cancellations it is
// sent go to cancelled; arrived gets one value per request waiting.
func hangingUpstream(t *testing.T, sse bool) (srv *httptest.Server, arrived chan struct{}, cancelled chan string) {
	arrived, cancelled = make(chan struct{}, 10), make(chan string, 10)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), "notifications/cancelled") {
			cancelled <- r.Header.Get("Mcp-Session-Id") + " " + string(b)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "id: e1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
			w.(http.Flusher).Flush()
		}
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv, arrived, cancelled
}

// lastData is the message in the last data line of an event stream, or
// the body itself when it is JSON.
func lastData(body string) map[string]any {
	msg := body
	for _, l := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			msg = d
		}
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(msg), &m)
	return m
}

// TestHTTPShutdownAnswersCallsInFlight: Shutdown (SIGTERM or SIGINT in
// aegis mcp http) answers a call waiting on the server, plain or on an
// event stream that could otherwise be resumed, with a JSON-RPC error,
// and tells the server to cancel it.
func TestHTTPShutdownAnswersCallsInFlight(t *testing.T) {
	for _, sse := range []bool{false, true} {
		name := "json"
		if sse {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			us, arrived, cancelled := hangingUpstream(t, sse)
			proxyURL, hp := startHTTPProxy(t, testJudge(t, ""), us.URL)
			type answer struct {
				status int
				body   string
			}
			got := make(chan answer, 1)
			go func() {
				resp, body := do(t, http.MethodPost, proxyURL, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{}}}`,
					map[string]string{"Mcp-Session-Id": "s1", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
				got <- answer{resp.StatusCode, body}
			}()
			<-arrived
			hp.Shutdown()
			a := <-got
			m := lastData(a.body)
			if errCode(m) != CodeServerGone || m["id"] != 7.0 || !strings.Contains(errMessage(m), "shutting down") {
				t.Errorf("the call in flight was answered %d %q", a.status, a.body)
			}
			if !sse && a.status != http.StatusServiceUnavailable {
				t.Errorf("status %d, want 503", a.status)
			}
			if c := <-cancelled; !strings.HasPrefix(c, "s1 ") || !strings.Contains(c, `"requestId":7`) {
				t.Errorf("the server was sent %q, want a cancellation of request 7 in session s1", c)
			}
			// Later requests are answered at once the same way.
			_, body := do(t, http.MethodPost, proxyURL, `{"jsonrpc":"2.0","id":8,"method":"ping"}`, map[string]string{"Content-Type": "application/json"})
			if m := lastData(body); errCode(m) != CodeServerGone || m["id"] != 8.0 {
				t.Errorf("after shutdown: %q", body)
			}
		})
	}
}

// TestSignalsEndAegisMCP: SIGTERM and SIGINT sent to the aegis binary,
// stdio and HTTP, with a call in flight: the call is answered with a
// JSON-RPC error and aegis exits 0; in stdio the server's process group
// and descendants end (awaited on pidfds), in HTTP the server is told to
// cancel the call.
func TestSignalsEndAegisMCP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds aegis: not in -short")
	}
	bin := aegisBin(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run("stdio "+sig.String(), func(t *testing.T) {
			// The server reads the call, says so, and never answers (its
			// output stays open); a grandchild shares its group.
			server := `sleep 600 </dev/null >/dev/null & read line
echo "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":[$$,$!]}}"
exec sleep 600`
			cmd := exec.Command(bin, "mcp", "stdio", "--incidents-db", filepath.Join(t.TempDir(), "i.db"), "--", "sh", "-c", server)
			stdin, _ := cmd.StdinPipe()
			defer stdin.Close()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			io.WriteString(stdin, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{}}}`+"\n")
			lines := bufio.NewScanner(out)
			if !lines.Scan() {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal("no notification from the server")
			}
			var note struct {
				Params struct {
					Data []int `json:"data"`
				} `json:"params"`
			}
			if json.Unmarshal(lines.Bytes(), &note) != nil || len(note.Params.Data) != 2 {
				t.Fatalf("notification %q", lines.Text())
			}
			fds := openPidfds(t, note.Params.Data)
			cmd.Process.Signal(sig)
			if !lines.Scan() {
				t.Fatal("the call in flight got no answer")
			}
			var m map[string]any
			if json.Unmarshal(lines.Bytes(), &m) != nil || errCode(m) != CodeServerGone || m["id"] != 3.0 || !strings.Contains(errMessage(m), "shutting down") {
				t.Errorf("the call in flight was answered %s", lines.Text())
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("aegis exited with %v, want 0", err)
			}
			if left := waitPidfds(t, fds, 2*time.Minute); len(left) > 0 {
				t.Errorf("processes %v outlived aegis", left)
			}
		})
		t.Run("http "+sig.String(), func(t *testing.T) {
			us, arrived, cancelled := hangingUpstream(t, false)
			cmd := exec.Command(bin, "mcp", "http", "--upstream", us.URL+"/mcp", "--listen", "127.0.0.1:0", "--log-format", "text",
				"--incidents-db", filepath.Join(t.TempDir(), "i.db"))
			cmd.Env = append(os.Environ(), "NO_COLOR=1")
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			logs := bufio.NewScanner(stderr)
			addr := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+/mcp)`)
			var proxyURL string
			for proxyURL == "" && logs.Scan() {
				if m := addr.FindStringSubmatch(logs.Text()); m != nil {
					proxyURL = m[1]
				}
			}
			if proxyURL == "" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal("aegis did not log its address")
			}
			go io.Copy(io.Discard, stderr)
			type answer struct {
				status int
				body   string
			}
			got := make(chan answer, 1)
			go func() {
				resp, body := do(t, http.MethodPost, proxyURL, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","arguments":{}}}`,
					map[string]string{"Mcp-Session-Id": "s2", "Content-Type": "application/json"})
				got <- answer{resp.StatusCode, body}
			}()
			<-arrived
			cmd.Process.Signal(sig)
			a := <-got
			if m := lastData(a.body); errCode(m) != CodeServerGone || m["id"] != 4.0 || a.status != http.StatusServiceUnavailable {
				t.Errorf("the call in flight was answered %d %q", a.status, a.body)
			}
			if c := <-cancelled; !strings.HasPrefix(c, "s2 ") || !strings.Contains(c, `"requestId":4`) {
				t.Errorf("the server was sent %q", c)
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("aegis exited with %v, want 0", err)
			}
		})
	}
}

// TestHTTPCallTimeoutOnTheClock: over HTTP, call_timeout runs on the
// proxy's clock: the timer is armed at the deadline exactly, has not fired
// 100 ms before it, fires at it with a JSON-RPC timeout error, and the
// server is told to cancel the call.
func TestHTTPCallTimeoutOnTheClock(t *testing.T) {
	for _, sse := range []bool{false, true} {
		name := "json"
		if sse {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			us, arrived, cancelled := hangingUpstream(t, sse)
			j := testJudge(t, "")
			j.Config.CallTimeout = 2 * time.Second
			proxyURL, hp := startHTTPProxy(t, j, us.URL)
			start := time.Unix(1000, 0)
			fake := clock.NewFake(start)
			hp.Proxy.Clock = fake
			got := make(chan string, 1)
			go func() {
				_, body := do(t, http.MethodPost, proxyURL, `{"jsonrpc":"2.0","id":"t","method":"tools/call","params":{"name":"x","arguments":{}}}`,
					map[string]string{"Mcp-Session-Id": "s3", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
				got <- body
			}()
			<-arrived // the timer is armed before the request goes upstream
			deadline := start.Add(2 * time.Second)
			if d, ok := fake.Next(); !ok || !d.Equal(deadline) {
				t.Fatalf("timer at %v (%v), want %v", d, ok, deadline)
			}
			fake.Set(deadline.Add(-100 * time.Millisecond))
			if d, ok := fake.Next(); !ok || !d.Equal(deadline) {
				t.Fatalf("the timer fired 100 ms before the deadline")
			}
			fake.Set(deadline)
			m := lastData(<-got)
			if errCode(m) != CodeTimeout || m["id"] != "t" {
				t.Errorf("answered %v", m)
			}
			if c := <-cancelled; !strings.HasPrefix(c, "s3 ") || !strings.Contains(c, `"requestId":"t"`) {
				t.Errorf("the server was sent %q", c)
			}
		})
	}
}

// TestHTTPBadInputFromTheClient: invalid UTF-8 and other malformed
// messages POSTed are answered with a JSON-RPC error (status 400) that
// keeps the session and CORS headers; nothing reaches the server.
func TestHTTPBadInputFromTheClient(t *testing.T) {
	reached := make(chan string, 10)
	us := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reached <- string(b)
		w.Header().Set("Access-Control-Allow-Origin", "*")
		writeJSON(w, http.StatusOK, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
	defer us.Close()
	proxyURL, _ := startHTTPProxy(t, testJudge(t, ""), us.URL)
	hdr := map[string]string{"Mcp-Session-Id": "s4", "Origin": "http://localhost:3000", "Content-Type": "application/json"}
	do(t, http.MethodPost, proxyURL, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, hdr)
	<-reached
	for _, c := range []struct {
		name, body string
		code       int
		id         any
	}{
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"a\xff\"}}}", -32700, 5.0},
		{"not JSON", `{"jsonrpc":"2.0","id":1,`, -32700, nil},
		{"no jsonrpc", `{"id":2,"method":"ping"}`, -32600, 2.0},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, http.MethodPost, proxyURL, c.body, hdr)
			m := lastData(body)
			if resp.StatusCode != http.StatusBadRequest || errCode(m) != c.code || m["id"] != c.id {
				t.Errorf("got %d %s, want 400 with code %d id %v", resp.StatusCode, body, c.code, c.id)
			}
			if resp.Header.Get("Mcp-Session-Id") != "s4" || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("headers %v", resp.Header)
			}
		})
	}
	select {
	case b := <-reached:
		t.Errorf("the server was sent %q", b)
	default:
	}
}
