package mcp

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// pipeSession connects a Go SDK client to srv, directly or through a
// proxy with the default policy, over in-memory pipes carrying the stdio
// framing. It returns the client session and a function that closes
// everything and waits for it.
func pipeSession(b *testing.B, srv *sdk.Server, proxied bool) (*sdk.ClientSession, func()) {
	ctx := context.Background()
	c2sR, c2sW := io.Pipe() // client → (proxy →) server
	s2cR, s2cW := io.Pipe() // server → (proxy →) client
	clientIn, clientOut := s2cR, io.WriteCloser(c2sW)
	serverIn, serverOut := c2sR, io.WriteCloser(s2cW)
	proxyDone := make(chan error, 1)
	if proxied {
		p2sR, p2sW := io.Pipe()
		s2pR, s2pW := io.Pipe()
		serverIn, serverOut = p2sR, s2pW
		j := testJudge(b, "")
		p := &Proxy{Judge: j, Server: "bench"}
		go func() {
			proxyDone <- p.Run(ctx, c2sR, s2cW, Conn{In: p2sW, Out: s2pR, Wait: func(outDone <-chan struct{}) error {
				if outDone != nil {
					<-outDone
				}
				return nil
			}})
			s2cW.Close()
		}()
	}
	ss, err := srv.Connect(ctx, &sdk.IOTransport{Reader: serverIn, Writer: serverOut}, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return cs, func() {
		cs.Close()
		ss.Wait()
		if proxied {
			<-proxyDone
		}
	}
}

// BenchmarkToolsCall measures what the proxy adds to one tools/call with
// the default checks (the text checks on the arguments, the leak check,
// the poisoning rules and the guard on the result), against the same Go
// SDK server called directly. Each iteration makes one direct and one
// proxied call, so both see the same machine load; the p50 of each and of
// their difference are reported.
func BenchmarkToolsCall(b *testing.B) {
	direct, closeDirect := pipeSession(b, sdkServer(), false)
	defer closeDirect()
	proxied, closeProxied := pipeSession(b, sdkServer(), true)
	defer closeProxied()
	ctx := context.Background()
	params := &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "What is the weather in Paris tomorrow? Please answer in one sentence."}}
	for _, cs := range []*sdk.ClientSession{direct, proxied} { // warm up
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	var d, p []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := direct.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := proxied.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		d, p = append(d, t1.Sub(t0)), append(p, t2.Sub(t1))
	}
	reportP50(b, d, p)
}

func reportP50(b *testing.B, d, p []time.Duration) {
	added := make([]time.Duration, len(d))
	for i := range d {
		added[i] = p[i] - d[i]
	}
	p50 := func(x []time.Duration) float64 {
		x = slices.Clone(x)
		slices.Sort(x)
		return float64(x[len(x)/2].Nanoseconds()) / 1e3
	}
	b.ReportMetric(p50(d), "direct-p50-µs")
	b.ReportMetric(p50(p), "proxied-p50-µs")
	b.ReportMetric(p50(added), "added-p50-µs")
}

// BenchmarkToolsCallEverything measures the same against the real
// server-everything over stdio: the Go SDK client starts it directly, or
// through the aegis binary (`aegis mcp stdio`), and calls its echo tool.
func BenchmarkToolsCallEverything(b *testing.B) {
	if _, err := exec.LookPath("node"); err != nil {
		b.Skip("node not installed")
	}
	out, err := exec.Command(filepath.Join(repoRootB(b), "scripts", "mcp-parts")).Output()
	if err != nil {
		b.Skipf("scripts/mcp-parts: %v", err)
	}
	cache := string(out[:len(out)-1])
	everything := filepath.Join(cache, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	bin := filepath.Join(b.TempDir(), "aegis")
	build := exec.Command("go", "build", "-o", bin, "./cmd/aegis")
	build.Dir = repoRootB(b)
	if o, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, o)
	}
	ctx := context.Background()
	connect := func(cmd *exec.Cmd) *sdk.ClientSession {
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		return cs
	}
	direct := connect(exec.Command("node", everything, "stdio"))
	defer direct.Close()
	proxied := connect(exec.Command(bin, "mcp", "stdio", "--incidents-db", filepath.Join(b.TempDir(), "incidents.db"), "--log-format", "json",
		"--", "node", everything, "stdio"))
	defer proxied.Close()
	params := &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "What is the weather in Paris tomorrow? Please answer in one sentence."}}
	for _, cs := range []*sdk.ClientSession{direct, proxied} {
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	var d, p []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := direct.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := proxied.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		d, p = append(d, t1.Sub(t0)), append(p, t2.Sub(t1))
	}
	reportP50(b, d, p)
}

func repoRootB(b *testing.B) string {
	dir, _ := filepath.Abs(".")
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			b.Fatal("no go.mod")
		}
		dir = up
	}
}
