package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// failRecorder wraps the pipeline's attempt and records the findings the
// gateway hands it with Fail.
type failRecorder struct {
	*pipeline.Attempt
	mu     *sync.Mutex
	failed *[]string
}

func (f *failRecorder) Fail(fd validator.Finding, now time.Time) pipeline.Step {
	f.mu.Lock()
	*f.failed = append(*f.failed, string(fd.Reason))
	f.mu.Unlock()
	return f.Attempt.Fail(fd, now)
}

// TestGatewayFindingsEnterTheAttempt: a finding the gateway makes (the
// upstream breaks off, refuses a retry, or the response passes the
// memory cap) enters through the attempt, and the answer's verdict is
// the attempt's.
func TestGatewayFindingsEnterTheAttempt(t *testing.T) {
	truncated := func(w http.ResponseWriter, r *http.Request, call int32) {
		fmt.Fprintf(w, "data: %s\n\n", chatChunk("Hello"))
	}
	for _, tc := range []struct {
		name     string
		policy   *policy.Policy
		maxBytes int
		serve    func(w http.ResponseWriter, r *http.Request, call int32)
		calls    int32
		reason   validator.Reason
	}{
		{"upstream broke off", mustPolicy(t, ""), 0, truncated, 1, validator.ReasonUpstreamError},
		{"memory cap", mustPolicy(t, ""), 8, func(w http.ResponseWriter, r *http.Request, call int32) {
			w.Write(sseBody(chatChunk("Hello"), chatChunk(", world"), finishChunk))
		}, 1, validator.ReasonLengthExceeded},
		{"refused retry", requireJSON(t, "max_retries: 1\n"), 0, func(w http.ResponseWriter, r *http.Request, call int32) {
			if call > 1 {
				http.Error(w, "busy", http.StatusInternalServerError)
				return
			}
			w.Write(sseBody(chatChunk("never json"), finishChunk))
		}, 2, validator.ReasonUpstreamError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) { tc.serve(w, r, calls.Add(1)) })
			var mu sync.Mutex
			var failed []string
			g := &Gateway{Upstreams: []*upstream.Upstream{up}, MaxResponseBytes: tc.maxBytes,
				NewChecker: func(req *validator.Request) (Checker, error) {
					a, err := pipeline.New(tc.policy, req, pipeline.Options{})
					if err != nil {
						return nil, err
					}
					return &failRecorder{Attempt: a, mu: &mu, failed: &failed}, nil
				}}
			srv := start(t, g)
			resp := post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`)
			var out errorBody
			if err := json.Unmarshal(readAllBody(t, resp), &out); err != nil || out.Aegis == nil {
				t.Fatalf("status %d: %v %+v", resp.StatusCode, err, out)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(failed) != 1 || failed[0] != string(tc.reason) {
				t.Errorf("findings handed to the attempt: %v, want [%s]", failed, tc.reason)
			}
			if out.Aegis.Reason != tc.reason || out.Error.Code != ErrorCode(tc.reason) || calls.Load() != tc.calls {
				t.Errorf("verdict %s code %s after %d upstream calls; want %s after %d", out.Aegis.Reason, out.Error.Code, calls.Load(), tc.reason, tc.calls)
			}
		})
	}
}
