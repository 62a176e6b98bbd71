package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkServer is a real MCP server from the Go SDK with an echo tool, a tool
// that returns a secret, and a poisoned tool.
func sdkServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "sdk-test", Version: "1"}, nil)
	type msg struct {
		Message string `json:"message" jsonschema:"what to echo"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes back the input string"},
		func(_ context.Context, _ *sdk.CallToolRequest, in msg) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Message}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "config", Description: "Shows the deployment configuration"},
		func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "key=AKIA2E3ZQF7B2LMC4XRW region=eu"}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: poisonedTools[0].description},
		func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "3"}}}, nil, nil
		})
	return s
}

func startHTTPProxy(t *testing.T, j *Judge, upstream string) (string, *HTTPProxy) {
	t.Helper()
	u, _ := url.Parse(upstream)
	tr := &http.Transport{}
	hp := &HTTPProxy{Proxy: &Proxy{Judge: j, Server: "http-test"}, Upstream: u, Client: &http.Client{Transport: tr}}
	ps := httptest.NewServer(hp)
	t.Cleanup(func() { ps.Close(); tr.CloseIdleConnections() })
	return ps.URL + "/mcp", hp
}

func TestHTTPWithTheGoSDK(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonResponse), func(t *testing.T) {
			h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return sdkServer() }, &sdk.StreamableHTTPOptions{JSONResponse: jsonResponse})
			us := httptest.NewServer(h)
			defer us.Close()
			proxyURL, hp := startHTTPProxy(t, testJudge(t, ""), us.URL)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: proxyURL, HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			if got := strings.Join(names, ","); got != "config,echo" {
				t.Errorf("tools through the proxy: %s (the poisoned add must be hidden)", got)
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi there"}})
			if err != nil || res.Content[0].(*sdk.TextContent).Text != "hi there" {
				t.Errorf("echo: %v %v", res, err)
			}
			res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "config", Arguments: map[string]any{}})
			if err != nil || res.Content[0].(*sdk.TextContent).Text != "key="+redactionMark+" region=eu" {
				t.Errorf("secret: %+v %v", res, err)
			}
			_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "AKIA2E3ZQF7B2LMC4XRW"}})
			if err == nil || !strings.Contains(err.Error(), "aegis_secret_leak") {
				t.Errorf("a secret in the arguments: %v", err)
			}
			if hp.Sessions() == 0 {
				t.Error("no session tracked")
			}
		})
	}
}

// sseServer is a scripted Streamable HTTP server: a tools/call's answer
// stream ends after a progress event with an id, and the answer comes on
// the GET stream resumed from that id.
func sseServer(t *testing.T, withIDs bool) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Mcp-Session-Id", "sess-1")
		switch r.Method {
		case http.MethodPost:
			if r.Header.Get("Mcp-Session-Id") != "sess-1" && r.Header.Get("X-First") == "" {
				http.Error(w, "no session", http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			if withIDs {
				io.WriteString(w, "id: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
			} else {
				io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
			}
		case http.MethodGet:
			if r.Header.Get("Last-Event-ID") != "e1" {
				http.Error(w, "want Last-Event-ID e1, got "+r.Header.Get("Last-Event-ID"), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, ": keep-alive\n\nid: e2\nretry: 1000\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"token AKIA2E3ZQF7B2LMC4XRW\"}]}}\n\n")
		}
	}))
}

func do(t *testing.T, method, u, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHTTPResumption(t *testing.T) {
	us := sseServer(t, true)
	defer us.Close()
	proxyURL, _ := startHTTPProxy(t, testJudge(t, ""), us.URL)
	hdr := map[string]string{"Mcp-Session-Id": "sess-1", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	resp, body := do(t, http.MethodPost, proxyURL, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"env","arguments":{},"_meta":{"progressToken":1}}}`, hdr)
	if resp.Header.Get("Mcp-Session-Id") != "sess-1" {
		t.Errorf("session header not passed back: %v", resp.Header)
	}
	if !strings.Contains(body, "id: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"") || strings.Contains(body, `"error"`) {
		t.Errorf("POST stream (resumable: no error may be added): %q", body)
	}
	_, body = do(t, http.MethodGet, proxyURL, "", map[string]string{"Mcp-Session-Id": "sess-1", "Last-Event-ID": "e1", "Accept": "text/event-stream"})
	if !strings.Contains(body, ": keep-alive\n\n") || !strings.Contains(body, "id: e2\nretry: 1000\ndata: ") ||
		strings.Contains(body, "AKIA2E3ZQF7B2LMC4XRW") || !strings.Contains(body, redactionMark) {
		t.Errorf("resumed stream: %q", body)
	}
}

func TestHTTPStreamCutBeforeTheAnswer(t *testing.T) {
	us := sseServer(t, false)
	defer us.Close()
	proxyURL, _ := startHTTPProxy(t, testJudge(t, ""), us.URL)
	_, body := do(t, http.MethodPost, proxyURL, `{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"env","arguments":{}}}`,
		map[string]string{"Mcp-Session-Id": "sess-1", "Content-Type": "application/json"})
	sc := bufio.NewScanner(strings.NewReader(body))
	var last string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			last = strings.TrimPrefix(sc.Text(), "data: ")
		}
	}
	var m map[string]any
	if json.Unmarshal([]byte(last), &m) != nil || errCode(m) != CodeServerGone || m["id"] != "q" {
		t.Errorf("stream cut: %q", body)
	}
}

func TestHTTPServerHangsOrIsDown(t *testing.T) {
	release := make(chan struct{})
	cancelled := make(chan string, 1)
	us := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, _ := io.ReadAll(r.Body); strings.Contains(string(b), "notifications/cancelled") {
			cancelled <- r.Header.Get("Mcp-Session-Id") + " " + string(b)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer us.Close()
	defer close(release)
	j := testJudge(t, "")
	j.Config.CallTimeout = 100 * time.Millisecond
	proxyURL, _ := startHTTPProxy(t, j, us.URL)
	resp, body := do(t, http.MethodPost, proxyURL, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`,
		map[string]string{"Mcp-Session-Id": "s1"})
	var m map[string]any
	if json.Unmarshal([]byte(body), &m) != nil || errCode(m) != CodeTimeout || resp.StatusCode != http.StatusBadGateway {
		t.Errorf("hang: %d %s", resp.StatusCode, body)
	}
	if c := <-cancelled; !strings.HasPrefix(c, "s1 ") || !strings.Contains(c, `"requestId":1`) {
		t.Errorf("the server was sent %q, want a cancellation of request 1 in session s1", c)
	}

	down, _ := startHTTPProxy(t, j, "http://127.0.0.1:1/mcp")
	resp, body = do(t, http.MethodPost, down, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, nil)
	if json.Unmarshal([]byte(body), &m) != nil || errCode(m) != CodeServerGone || m["id"] != 2.0 {
		t.Errorf("down: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, http.MethodPost, down, strings.Repeat("x", j.Config.MaxMessageBytes+1), nil)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "max_message_bytes") {
		t.Errorf("too large: %d %s", resp.StatusCode, body)
	}
}

func TestHTTPClientDisconnectCancelsTheUpstream(t *testing.T) {
	cancelled := make(chan struct{})
	us := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(cancelled)
	}))
	defer us.Close()
	proxyURL, _ := startHTTPProxy(t, testJudge(t, ""), us.URL)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, proxyURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request was not cancelled when the client went away")
	}
}

// TestHTTPRefusalKeepsSessionAndCORS: a call Aegis refuses itself is
// answered with the session id and the CORS headers the upstream sends.
func TestHTTPRefusalKeepsSessionAndCORS(t *testing.T) {
	us := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Expose-Headers", "Mcp-Session-Id")
		w.Header().Set("Mcp-Session-Id", "s9")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	defer us.Close()
	j := testJudge(t, "checks:\n  banned: {terms: [rm -rf]}\n")
	proxyURL, _ := startHTTPProxy(t, j, us.URL)
	hdr := map[string]string{"Mcp-Session-Id": "s9", "Origin": "http://localhost:3000"}
	do(t, http.MethodPost, proxyURL, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, hdr)
	resp, body := do(t, http.MethodPost, proxyURL, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sh","arguments":{"cmd":"rm -rf /"}}}`, hdr)
	var m map[string]any
	if json.Unmarshal([]byte(body), &m) != nil || errCode(m) != CodeRefused {
		t.Fatalf("not refused: %s", body)
	}
	for k, want := range map[string]string{"Mcp-Session-Id": "s9", "Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": "Mcp-Session-Id"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
}

func TestHTTPRefusesForeignOrigins(t *testing.T) {
	us := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
	defer us.Close()
	proxyURL, _ := startHTTPProxy(t, testJudge(t, ""), us.URL)
	for _, c := range []struct {
		origin string
		status int
	}{{"", 200}, {"http://localhost:6274", 200}, {"http://127.0.0.1:3000", 200}, {"https://evil.example", 403}, {"http://attacker.localhost.example", 403}} {
		hdr := map[string]string{"Content-Type": "application/json"}
		if c.origin != "" {
			hdr["Origin"] = c.origin
		}
		if resp, _ := do(t, http.MethodPost, proxyURL, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, hdr); resp.StatusCode != c.status {
			t.Errorf("origin %q: status %d, want %d", c.origin, resp.StatusCode, c.status)
		}
	}
}

func TestHTTPConcurrentInitializeWithoutSession(t *testing.T) {
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	us := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		writeJSON(w, http.StatusOK, []byte(`{"jsonrpc":"2.0","id":0,"result":{}}`))
	}))
	defer us.Close()
	proxyURL, _ := startHTTPProxy(t, testJudge(t, ""), us.URL)
	bodies := make(chan string, 2)
	for range 2 {
		go func() {
			_, b := do(t, http.MethodPost, proxyURL, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, map[string]string{"Content-Type": "application/json"})
			bodies <- b
		}()
	}
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("both initializes did not reach the server: one was refused as a duplicate")
		}
	}
	close(release)
	for range 2 {
		if b := <-bodies; !strings.Contains(b, `"result"`) {
			t.Errorf("initialize: %s", b)
		}
	}
}

// FuzzSSEStream feeds arbitrary event streams through the proxy's
// rewriter: it never panics, and every data line it writes is a message
// that decodes (judged or passed) or the server's own line.
func FuzzSSEStream(f *testing.F) {
	for _, s := range []string{
		"id: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"AKIA2E3ZQF7B2LMC4XRW\"}]}}\n\n",
		": keep-alive\n\nretry: 10\n\n",
		"data: {\"jsonrpc\":\"2.0\",\n",
		"data: a\ndata: b\r\n\r\n",
		"id:\ndata:\n\n",
	} {
		f.Add([]byte(s))
	}
	j := testJudge(f, "")
	j.Pins = nil
	h := &HTTPProxy{Proxy: &Proxy{Judge: j, Server: "fuzz"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		id := json.RawMessage("1")
		sess := h.Proxy.NewSession()
		sess.FromClient(t.Context(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`))
		h.stream(t.Context(), rec, strings.NewReader(string(body)), sess, &id)
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || strings.Contains(string(body), line) {
				continue
			}
			if _, err := Decode([]byte(data)); err != nil {
				t.Fatalf("wrote a data line that is neither the server's nor a message: %q", line)
			}
		}
	})
}
