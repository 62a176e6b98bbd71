package stall

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"net/http"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// streamLlama streams a completion from the real llama-server and calls
// chunk with the arrival time of each SSE event's content.
func streamLlama(t *testing.T, chunk func(now time.Time, content string)) {
	t.Helper()
	env := testbed.Require(t, "llama-cpu")
	body := `{"prompt":"Once upon a time","temperature":0,"n_predict":64,"stream":true}`
	req, err := http.NewRequest("POST", env.LlamaCPUURL+"/completion", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := testbed.HTTPClient.Do(req)
	if err != nil {
		t.Fatalf("llama-server: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			chunk(time.Now(), line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestLlamaStreamWithinDeadlines drives the watchdog with the wall clock
// from a real llama-server stream: with the default deadlines nothing
// fires, and the deadlines it would next need are in the future.
func TestLlamaStreamWithinDeadlines(t *testing.T) {
	w := New(*DefaultConfig(), Options{})
	w.Tick(time.Now())
	chunks := 0
	streamLlama(t, func(now time.Time, line string) {
		w.Write([]byte(line))
		w.Tick(now)
		chunks++
		if d := w.NextDeadline(); !d.After(now) {
			t.Fatalf("next deadline %v is not after %v", d, now)
		}
	})
	w.Close()
	if chunks < 10 || len(w.Findings()) != 0 {
		t.Fatalf("%d chunks, findings %+v", chunks, w.Findings())
	}
}

// TestLlamaStreamGapFires uses a gap deadline far below the real
// inter-token time, so the real stream must trip it.
func TestLlamaStreamGapFires(t *testing.T) {
	w := New(Config{TTFT: Duration(30 * time.Second), Gap: Duration(time.Nanosecond)}, Options{})
	w.Tick(time.Now())
	streamLlama(t, func(now time.Time, line string) {
		w.Tick(now) // a tick while waiting: silence since the last chunk
		w.Write([]byte(line))
		w.Tick(now) // the chunk's own tick records the activity
	})
	fs := w.Findings()
	if len(fs) != 1 || !strings.HasPrefix(fs[0].Message, "gap:") {
		t.Fatalf("findings %+v, want one gap stall", fs)
	}
}
