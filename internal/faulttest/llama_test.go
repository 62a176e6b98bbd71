package faulttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// startLlama runs a llama-server of its own (the testbed's binary and
// model) on a free port, so the test can kill it.
func startLlama(t *testing.T) (*exec.Cmd, string) {
	env := testbed.Require(t, "llama-cpu")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(env.LlamaServer, "-m", env.Model, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"-c", "2048", "-np", "1", "-t", "1", "--no-webui")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-waited })
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return cmd, base
			}
		}
		select {
		case <-waited:
			t.Fatalf("llama-server exited: %s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// killingProxy forwards to the llama-server and records what it sent;
// once it has forwarded after events, it kills the server with SIGKILL,
// mid-generation.
type killingProxy struct {
	mu       sync.Mutex
	recorded bytes.Buffer
}

func (k *killingProxy) text() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var s string
	sc := bufio.NewScanner(bytes.NewReader(k.recorded.Bytes()))
	for sc.Scan() {
		p, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		var m struct {
			Choices []struct{ Delta struct{ Content string } }
		}
		if json.Unmarshal(p, &m) == nil {
			for _, c := range m.Choices {
				s += c.Delta.Content
			}
		}
	}
	return s
}

type recordingBody struct {
	io.ReadCloser
	k      *killingProxy
	after  int
	events int
	kill   func()
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.k.mu.Lock()
	b.k.recorded.Write(p[:n])
	b.events += bytes.Count(p[:n], []byte("\n\n"))
	b.k.mu.Unlock()
	if b.events >= b.after && b.kill != nil {
		b.kill()
		b.kill = nil
	}
	return n, err
}

// TestLlamaServerKilledMidStream: a real llama-server dies in the middle
// of an answer. The client gets every byte of text the server sent (the
// checks cleared the held-back tail once the stream ended), then a clear
// upstream error.
func TestLlamaServerKilledMidStream(t *testing.T) {
	cmd, base := startLlama(t)
	target, _ := url.Parse(base)
	k := &killingProxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0) // the proxy reports the kill; expected
	posts := 0
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == http.MethodPost {
			posts++
			resp.Body = &recordingBody{ReadCloser: resp.Body, k: k, after: 80, kill: func() { cmd.Process.Kill() }}
		}
		return nil
	}
	// The proxy reads the client's body whole before it forwards it:
	// once it has flushed the response headers, net/http may close a
	// request body that is not read to its end, and the transport still
	// reading it to confirm its end would then fail the write and close
	// the upstream connection, an empty stream cut off before any text.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	f := &fake{srv: proxy}
	// The stall timers are far beyond a loaded machine's delays: the
	// kill, not a stall, is the fault under test.
	r := newRig(t, f, patientStall, nil)
	body := `{"model":"m","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":1500,"ignore_eos":true,"temperature":0}`
	o := read(t, r.post(body, true), true)
	sentText := k.text()
	t.Logf("llama-server sent %d bytes of text before it died; the client got %d, then %q", len(sentText), len(o.content), o.code)
	if o.code != "aegis_upstream_error" && o.code != "aegis_stall" {
		t.Fatalf("want a clear upstream error after the kill, got %q %q", o.code, o.message)
	}
	if o.content != sentText {
		t.Fatalf("bytes lost or repeated:\n got %q\nwant %q", o.content, sentText)
	}
	if len(sentText) == 0 || posts < 1 {
		k.mu.Lock()
		raw := k.recorded.String()
		k.mu.Unlock()
		t.Fatalf("the server sent no text before it died (posts %d, client got %q %q); the test proves nothing; the server sent:\n%.2000s",
			posts, o.code, o.message, raw)
	}
}
