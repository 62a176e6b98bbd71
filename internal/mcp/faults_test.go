package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
)

// TestServerThatFailsToStart: every request gets a JSON-RPC error naming
// the failure, and RunStdio returns it once the client closes.
func TestServerThatFailsToStart(t *testing.T) {
	p := &Proxy{Judge: testJudge(t, ""), Server: "missing", Bus: &events.Bus{}}
	cr, cw := io.Pipe()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- p.RunStdio(context.Background(), cr, pw, exec.Command("/nonexistent/aegis-test-server"))
		pw.Close()
	}()
	go func() {
		io.WriteString(cw, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`+"\n")
		io.WriteString(cw, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		io.WriteString(cw, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n")
		cw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var ids []any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if errCode(m) != CodeServerGone || !strings.Contains(errMessage(m), "did not start") {
			t.Errorf("answer %v", m)
		}
		ids = append(ids, m["id"])
	}
	if len(ids) != 2 || ids[0] != 0.0 || ids[1] != 1.0 {
		t.Errorf("answered ids %v, want [0 1]", ids)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "starting the server") {
		t.Errorf("RunStdio returned %v", err)
	}
}

// TestSignalStopsTheServersGroup: when ctx ends (SIGTERM or SIGINT in the
// CLI), the call in flight is answered with an error and the server's
// whole process group is stopped. The server's child holds its output
// open, so RunStdio can return only once the child is gone too.
func TestSignalStopsTheServersGroup(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	p := &Proxy{Judge: testJudge(t, ""), Server: "sh", Bus: &events.Bus{}}
	cr, cw := io.Pipe()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	// The child sleeps with the server's stdout; the server reads its
	// input and never answers.
	cmd := exec.Command("sh", "-c", "sleep 600 & cat >/dev/null")
	go func() {
		done <- p.RunStdio(ctx, cr, pw, cmd)
		pw.Close()
	}()
	sub := p.Bus.Subscribe(10)
	defer sub.Close()
	go io.WriteString(cw, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x","arguments":{}}}`+"\n")
	for e := range sub.C { // the call is in flight once its start is published
		if e.Kind == events.RequestStarted {
			break
		}
	}
	lines := bufio.NewScanner(pr)
	cancel()
	if !lines.Scan() {
		t.Fatal("no answer to the call in flight")
	}
	var m map[string]any
	_ = json.Unmarshal(lines.Bytes(), &m)
	if errCode(m) != CodeServerGone || m["id"] != 9.0 {
		t.Errorf("call in flight answered %v", m)
	}
	<-done
	cw.Close()
}
