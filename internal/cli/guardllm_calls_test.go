package cli

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// TestGuardLLMCallsCounted: a guard_llm check on a guard server (the
// testbed's llama-server) is a guard call like the embedded classifier's:
// aegis_guard_calls_total and aegis_guard_call_duration_seconds count it
// under the server's label, not only device="embedded".
func TestGuardLLMCallsCounted(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	u, err := url.Parse(env.LlamaCPUURL)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	doc := "release: buffer\nchecks:\n  guard_llm: {url: '" + env.LlamaCPUURL + "', kind: llama, protocol: verdict-json, deadline: 60s, fail_open: true}\n"
	if err := os.WriteFile(pol, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, env.LlamaCPUURL, filepath.Join(dir, "incidents.db"), pol)
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":24,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	device := u.Host
	var calls, timed float64
	// The call was made before the answer (release: buffer waits for the
	// guard); its event reaches the metrics collector on the collector's
	// goroutine, which says nothing when it has. So /metrics is read
	// until the call shows, within a bound far past any scheduling delay:
	// only a call that is never counted fails.
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for giveUp := time.Now().Add(time.Minute); calls == 0 || timed == 0; <-poll.C {
		if time.Now().After(giveUp) {
			t.Fatalf("no guard call counted under device=%q: calls %v, timed %v", device, calls, timed)
		}
		mr, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(mr.Body)
		mr.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fams["aegis_guard_calls_total"].GetMetric() {
			for _, l := range m.Label {
				if l.GetName() == "device" && l.GetValue() == device {
					calls = m.Counter.GetValue()
				}
			}
		}
		for _, m := range fams["aegis_guard_call_duration_seconds"].GetMetric() {
			for _, l := range m.Label {
				if l.GetName() == "device" && l.GetValue() == device {
					timed = float64(m.Histogram.GetSampleCount())
				}
			}
		}
		if calls == 0 && resp.StatusCode != http.StatusOK {
			t.Fatalf("request answered %d", resp.StatusCode)
		}
	}
	t.Logf("aegis_guard_calls_total{device=%q} = %v, %v timed", device, calls, timed)
}
