package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/store"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

func TestStaticAssetsAreSelfContained(t *testing.T) {
	// Only the SVG namespace URI may appear: it names, it does not fetch.
	remote := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(staticFS, "static", func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		b, _ := staticFS.ReadFile(p)
		for _, m := range remote.FindAllString(string(b), -1) {
			if m != "http://www.w3.org" {
				t.Errorf("%s refers to a remote resource: %s", p, m)
			}
		}
		if strings.Contains(string(b), "@import") || strings.Contains(string(b), "@font-face") {
			t.Errorf("%s imports a stylesheet or font", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRoutesAndHostCheck(t *testing.T) {
	var bus events.Bus
	d := New(&bus, nil)
	defer d.Close()
	tests := []struct {
		name, host, path string
		wantCode         int
		wantType         string
		peer             string
	}{
		{"page", "127.0.0.1:8088", "/ui/", 200, "text/html", ""},
		{"redirect", "localhost:8088", "/ui", 301, "", ""},
		{"script", "[::1]:8088", "/ui/app.js", 200, "javascript", ""},
		{"style", "localhost", "/ui/style.css", 200, "text/css", ""},
		{"incidents without a store", "127.0.0.1", "/ui/api/incidents", 200, "application/json", ""},
		{"bad limit", "127.0.0.1", "/ui/api/incidents?limit=x", 400, "application/json", ""},
		{"bad reason", "127.0.0.1", "/ui/api/incidents?reason=nope", 400, "application/json", ""},
		{"missing asset", "127.0.0.1", "/ui/nope.js", 404, "", ""},
		{"overlong-encoded dots", "127.0.0.1", "/ui/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd", 404, "", ""},
		{"NUL in path", "127.0.0.1", "/ui/app.js%00", 404, "", ""},
		{"dns rebinding refused", "evil.example:8088", "/ui/", 403, "", ""},
		{"remote peer refused", "10.0.0.5:8088", "/ui/", 403, "", "10.0.0.9:5000"},
		{"ipv6 loopback peer", "[::1]:8088", "/ui/", 200, "text/html", "[::1]:5000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", tt.path, nil)
			req.Host = tt.host
			req.RemoteAddr = tt.peer
			if req.RemoteAddr == "" {
				req.RemoteAddr = "127.0.0.1:40000"
			}
			rec := httptest.NewRecorder()
			d.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode || !strings.Contains(rec.Header().Get("Content-Type"), tt.wantType) {
				t.Errorf("%s: %d %q, want %d %q", tt.path, rec.Code, rec.Header().Get("Content-Type"), tt.wantCode, tt.wantType)
			}
			if tt.wantCode == 200 && !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") {
				t.Error("no CSP header")
			}
		})
	}
}

// sseReader reads server-sent events from a stream.
type sseReader struct{ r *bufio.Reader }

func (s sseReader) next(t *testing.T) (string, []byte) {
	t.Helper()
	var event string
	var data []byte
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && event != "":
			return event, data
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = []byte(line[6:])
		}
	}
}

func TestEventStream(t *testing.T) {
	var bus events.Bus
	d := New(&bus, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	srv := httptest.NewServer(d)
	defer srv.Close()
	defer func() { cancel(); <-done }()

	// Before any page is open: lands in the snapshot. Observed directly,
	// so the page surely opens after it (Run applies what the bus
	// delivers on its own goroutine; the events below take that path).
	d.Observe(events.Event{Kind: events.RequestStarted, RequestID: "early"})

	resp, err := http.Get(srv.URL + "/ui/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sr := sseReader{bufio.NewReader(resp.Body)}
	ev, data := sr.next(t)
	var snap struct {
		Events []map[string]any
		Totals Totals
	}
	if err := json.Unmarshal(data, &snap); ev != "snapshot" || err != nil || len(snap.Events) != 1 || snap.Totals.InFlight != 1 {
		t.Fatalf("first message %s %s (%v)", ev, data, err)
	}

	halt := &validator.Verdict{Verdict: validator.Fail, Reason: validator.ReasonSecretLeak, Action: validator.ActionHalt}
	bus.Publish(events.Event{Kind: events.Verdict, RequestID: "early", Verdict: halt, Text: "sk-secret"})
	bus.Publish(events.Event{Kind: events.RequestFinished, RequestID: "early", Outcome: "halted"})
	bus.Publish(events.Event{Kind: events.GuardStatus, GuardDevice: "Vulkan0", GuardState: "ready"})

	var got []string
	var totals Totals
	var guards map[string]Guard
	for len(got) < 5 {
		ev, data := sr.next(t)
		got = append(got, ev)
		if strings.Contains(string(data), "sk-secret") {
			t.Fatal("output text sent to the page")
		}
		switch ev {
		case "totals":
			json.Unmarshal(data, &totals)
		case "guards":
			json.Unmarshal(data, &guards)
		}
	}
	if strings.Join(got, " ") != "event event totals event guards" {
		t.Errorf("messages: %v", got)
	}
	if totals.Reasons["secret_leak"] != 1 || totals.Outcomes["halted"] != 1 || totals.InFlight != 0 {
		t.Errorf("totals = %+v", totals)
	}
	if guards["Vulkan0"].State != "ready" {
		t.Errorf("guards = %+v", guards)
	}

	// Close ends the stream, so a server shutdown is not held up.
	d.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("stream did not end cleanly: %v", err)
	}
}

func TestIncidentsAPI(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "i.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.Add(context.Background(), &store.Incident{Kind: store.KindHalt, RequestID: "r1", Reason: validator.ReasonSecretLeak,
		Action: validator.ActionHalt, Risk: validator.RiskHigh, Text: "key: sk-abc123 end", HasText: true,
		Findings: []validator.Finding{{Check: "secret", Start: 5, End: 14, Message: "API key"}}})
	st.Add(context.Background(), &store.Incident{Kind: store.KindRetry, RequestID: "r2", Reason: validator.ReasonInvalidJSON,
		Action: validator.ActionRetryStricterFormat})
	var bus events.Bus
	d := New(&bus, st)
	defer d.Close()
	req := httptest.NewRequest("GET", "/ui/api/incidents?reason=secret_leak", nil)
	req.Host = "localhost:8088"
	req.RemoteAddr = "127.0.0.1:40000"
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, req)
	var out struct {
		Incidents []incidentView `json:"incidents"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Incidents) != 1 || len(out.Incidents[0].Segments) != 3 || out.Incidents[0].Segments[1].Text != "sk-abc123" {
		t.Fatalf("incidents = %s", rec.Body)
	}
}

func TestRingKeepsNewestInOrder(t *testing.T) {
	var bus events.Bus
	d := New(&bus, nil)
	defer d.Close()
	for i := 0; i < RingSize+7; i++ {
		d.Observe(events.Event{Kind: events.AttemptStarted, RequestID: "r", Attempt: i})
	}
	srv := httptest.NewServer(d)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/ui/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, data := sseReader{bufio.NewReader(resp.Body)}.next(t)
	var snap struct{ Events []struct{ Seq, Attempt int } }
	if err := json.Unmarshal(data, &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Events) != RingSize || snap.Events[0].Attempt != 7 || snap.Events[RingSize-1].Attempt != RingSize+6 {
		t.Fatalf("ring: %d events, first %+v, last %+v", len(snap.Events), snap.Events[0], snap.Events[len(snap.Events)-1])
	}
	for i := 1; i < len(snap.Events); i++ {
		if snap.Events[i].Seq != snap.Events[i-1].Seq+1 {
			t.Fatalf("out of order at %d", i)
		}
	}
	d.Close()
}

// TestTotalsCountRequests: failures by reason count requests, not
// attempts, and include blocks; outcomes use the request vocabulary.
func TestTotalsCountRequests(t *testing.T) {
	d := New(&events.Bus{}, nil)
	defer d.Close()
	loop := &validator.Verdict{Verdict: validator.Fail, Reason: validator.ReasonInvalidJSON, Action: validator.ActionRetryStricterFormat}
	block := &validator.Verdict{Verdict: validator.Fail, Reason: validator.ReasonPromptInjection, Action: validator.ActionBlock}
	for _, e := range []events.Event{
		{Kind: events.RequestStarted, RequestID: "a"},
		{Kind: events.Verdict, RequestID: "a", Verdict: loop},
		{Kind: events.Retry, RequestID: "a", Verdict: loop},
		{Kind: events.Verdict, RequestID: "a", Verdict: loop},
		{Kind: events.Halt, RequestID: "a", Verdict: loop},
		{Kind: events.RequestFinished, RequestID: "a", Outcome: events.OutcomeHalted},
		{Kind: events.RequestStarted, RequestID: "b"},
		{Kind: events.Halt, RequestID: "b", Verdict: block},
		{Kind: events.RequestFinished, RequestID: "b", Outcome: events.OutcomeBlocked},
		{Kind: events.RequestStarted, RequestID: "c"},
		{Kind: events.Verdict, RequestID: "c", Verdict: &validator.Verdict{Verdict: validator.Pass}},
		{Kind: events.RequestFinished, RequestID: "c", Outcome: events.OutcomeReleased},
	} {
		d.Observe(e)
	}
	want := Totals{
		Outcomes: map[string]int64{"halted": 1, "blocked": 1, "released": 1},
		Reasons:  map[string]int64{"invalid_json": 1, "prompt_injection": 1},
	}
	d.mu.Lock()
	got := d.totals
	d.mu.Unlock()
	if !reflect.DeepEqual(got.Outcomes, want.Outcomes) || !reflect.DeepEqual(got.Reasons, want.Reasons) || len(d.failed) != 0 {
		t.Fatalf("totals %+v, want %+v (pending %v)", got, want, d.failed)
	}
}
