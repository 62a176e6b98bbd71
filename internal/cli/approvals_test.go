package cli

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/approval"
	"github.com/aegis-sentinel/aegis/internal/events"
)

// TestApprovalsAPIAndCommand: with a token set, the approvals API (which
// shows held requests) needs it; `aegis approvals` lists a held call
// with its tools and paths and approves it bound to what it showed.
func TestApprovalsAPIAndCommand(t *testing.T) {
	t.Setenv("AEGIS_AUTH_TOKEN", "")
	o, err := startObservability(slog.New(slog.NewTextHandler(io.Discard, nil)), incidentsConfig{Path: filepath.Join(t.TempDir(), "i.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	srv := httptest.NewServer(o.Handler(http.NotFoundHandler(), "s3cret-token"))
	defer srv.Close()
	tk := o.Approvals.Hold(events.ApprovalRecord{RequestID: "r1", Time: time.Now(), Deadline: time.Now().Add(time.Minute),
		Calls: []events.ApprovalCall{{Tool: "send_email", Paths: []string{"body", "to"}}}, Reason: "unsafe_content",
		ArgsHash: "sha256:abc", PolicyVersion: "sha256:v1"})

	for _, tc := range []struct {
		name, method, path, token string
		want                      int
	}{
		{"list without token", "GET", approval.Path, "", http.StatusUnauthorized},
		{"one without token", "GET", approval.Path + "/" + tk.Record.ID, "", http.StatusUnauthorized},
		{"deny without token", "POST", approval.Path + "/" + tk.Record.ID + "/deny", "", http.StatusUnauthorized},
		{"wrong token", "GET", approval.Path, "guess", http.StatusUnauthorized},
		{"list with token", "GET", approval.Path, "s3cret-token", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if _, ok := o.Approvals.Get(tk.Record.ID); !ok {
		t.Fatal("a request without the token decided the call")
	}

	_, stderr, code := runCLI(t, "approvals", "list", "--url", srv.URL)
	if code == 0 || !strings.Contains(stderr, "wants its token") {
		t.Errorf("list without token: code %d, stderr %q", code, stderr)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600)
	stdout, stderr, code := runCLI(t, "approvals", "list", "--url", srv.URL, "--token-file", tokenFile)
	if code != 0 || !strings.Contains(stdout, tk.Record.ID) || !strings.Contains(stdout, "send_email(body, to)") {
		t.Fatalf("list: code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = runCLI(t, "approvals", "approve", tk.Record.ID, "--url", srv.URL, "--token-file", tokenFile)
	if code != 0 || !strings.Contains(stdout, "approved "+tk.Record.ID) {
		t.Fatalf("approve: code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if o := <-tk.Done(); o.Stage != approval.Approved || o.ArgsHash != "sha256:abc" || o.PolicyVersion != "sha256:v1" || o.By != "cli" {
		t.Errorf("outcome = %+v", o)
	}
	_, stderr, code = runCLI(t, "approvals", "deny", tk.Record.ID, "--url", srv.URL, "--token-file", tokenFile)
	if code == 0 || !strings.Contains(stderr, "404") {
		t.Errorf("deny of a decided call: code %d, stderr %q", code, stderr)
	}
	_, stderr, code = runCLI(t, "approvals", "approve", "--url", srv.URL)
	if code == 0 || !strings.Contains(stderr, "approval's ID") {
		t.Errorf("approve without ID: code %d, stderr %q", code, stderr)
	}
}
