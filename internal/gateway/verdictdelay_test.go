package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/metrics"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// TestVerdictDelayObserved: aegis_verdict_delay_seconds has one
// observation per judged request, from the events the gateway really
// publishes (not from hand-made ones).
func TestVerdictDelayObserved(t *testing.T) {
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sseBody(chatChunk("Hello"), chatChunk(", world"), finishChunk))
	})
	bus := &events.Bus{}
	sub := bus.Subscribe(256)
	defer sub.Close()
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, Events: bus})
	for _, stream := range []string{"true", "false"} {
		readAllBody(t, post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":`+stream+`}`))
	}
	c := metrics.New(nil)
	for finished := 0; finished < 2; {
		e := <-sub.C
		c.Observe(e)
		if e.Kind == events.RequestFinished {
			finished++
		}
	}
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), "GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "aegis_verdict_delay_seconds_count 2\n") {
		var lines []string
		for _, l := range strings.Split(rec.Body.String(), "\n") {
			if strings.Contains(l, "verdict_delay") {
				lines = append(lines, l)
			}
		}
		t.Fatalf("want 2 verdict delays observed:\n%s", strings.Join(lines, "\n"))
	}
}
