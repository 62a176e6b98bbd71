package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

// fakeMain answers as a llama-server, an Ollama or an OpenAI-compatible
// server would, for the interference test's main model.
func fakeMain(t *testing.T, kind MainKind) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/props" && kind == MainLlamaServer:
			w.Write([]byte(`{"total_slots":1}`))
		case r.URL.Path == "/completion" && kind == MainLlamaServer:
			w.Write([]byte(`{"content":"x","timings":{"predicted_n":64,"predicted_per_second":341.7}}`))
		case r.URL.Path == "/api/version" && kind == MainOllama:
			w.Write([]byte(`{"version":"0.17.4"}`))
		case r.URL.Path == "/api/ps" && kind == MainOllama:
			w.Write([]byte(`{"models":[{"name":"main:latest"}]}`))
		case r.URL.Path == "/api/generate" && kind == MainOllama:
			var req struct {
				Model string `json:"model"`
			}
			json.NewDecoder(r.Body).Decode(&req)
			if req.Model != "main:latest" {
				http.Error(w, `{"error":"model not found"}`, http.StatusNotFound)
				return
			}
			// 128 tokens in 0.375 s: 341.3 tok/s by Ollama's own counters.
			w.Write([]byte(`{"done":true,"eval_count":128,"eval_duration":375000000,"prompt_eval_count":20,"prompt_eval_duration":9000000}`))
		case r.URL.Path == "/v1/models" && kind == MainOpenAI:
			w.Write([]byte(`{"data":[{"id":"served-model"}]}`))
		case r.URL.Path == "/v1/chat/completions" && kind == MainOpenAI:
			w.Header().Set("Content-Type", "text/event-stream")
			f := w.(http.Flusher)
			for i := range 5 {
				w.Write([]byte(`data: {"choices":[{"delta":{"content":"w` + string(rune('a'+i)) + `"}}]}` + "\n\n"))
				f.Flush()
				time.Sleep(2 * time.Millisecond)
			}
			w.Write([]byte("data: [DONE]\n\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func TestOpenMainDetectsAndDecodes(t *testing.T) {
	cases := []struct {
		kind  MainKind
		model string
		want  float64 // 0: only positive
	}{
		{MainLlamaServer, "", 341.7},
		{MainOllama, "main:latest", 128 / 0.375},
		{MainOpenAI, "served-model", 0},
	}
	for _, tc := range cases {
		t.Run(tc.kind.String(), func(t *testing.T) {
			srv := fakeMain(t, tc.kind)
			m, err := openMain(context.Background(), srv.URL, MainAuto, "", srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			if m.kind != tc.kind || m.model != tc.model {
				t.Fatalf("detected %s model %q, want %s %q", m.kind, m.model, tc.kind, tc.model)
			}
			v, err := m.decode(context.Background(), 64)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want > 0 && (v < tc.want-0.01 || v > tc.want+0.01) || v <= 0 {
				t.Errorf("decode speed %.2f, want %.2f", v, tc.want)
			}
		})
	}
}

// TestStreamSpeed times an OpenAI stream on a fake clock: the chunks
// after the first over the time from the first to the last; a server's
// own timings win; too few chunks is an error.
func TestStreamSpeed(t *testing.T) {
	t0 := time.Unix(100, 0)
	tick := func(step time.Duration) func() time.Time {
		n := 0
		return func() time.Time { n++; return t0.Add(time.Duration(n) * step) }
	}
	chunk := func(s string) string { return `data: {"choices":[{"delta":{"content":"` + s + `"}}]}` + "\n\n" }
	stream := ": ping\n\n" + chunk("a") + chunk("b") + chunk("c") + chunk("d") + chunk("") + "data: [DONE]\n\n"
	v, err := streamSpeed(strings.NewReader(stream), tick(10*time.Millisecond))
	if err != nil || v < 99.99 || v > 100.01 {
		t.Errorf("4 chunks 10 ms apart: %.2f tok/s (%v), want 100", v, err)
	}
	own := chunk("a") + chunk("b") + `data: {"choices":[],"timings":{"predicted_per_second":342.5}}` + "\n\ndata: [DONE]\n\n"
	if v, err := streamSpeed(strings.NewReader(own), tick(time.Millisecond)); err != nil || v != 342.5 {
		t.Errorf("own timings: %.2f %v", v, err)
	}
	if _, err := streamSpeed(strings.NewReader(chunk("a")+"data: [DONE]\n\n"), tick(time.Millisecond)); err == nil {
		t.Error("one chunk timed")
	}
}

func TestOllamaSpeedCounters(t *testing.T) {
	if v, err := ollamaSpeed(128, 375_000_000); err != nil || v < 341.3 || v > 341.4 {
		t.Errorf("%.2f %v", v, err)
	}
	if _, err := ollamaSpeed(0, 1); err == nil {
		t.Error("no tokens accepted")
	}
}

func TestParseMainKind(t *testing.T) {
	for in, want := range map[string]MainKind{"": MainAuto, "auto": MainAuto, "llama": MainLlamaServer, "llama-server": MainLlamaServer, "ollama": MainOllama, "openai": MainOpenAI} {
		if got, err := ParseMainKind(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseMainKind("vllm"); err == nil {
		t.Error("unknown kind accepted")
	}
}

// TestPowerPerDevice: a CPU guard is charged the RAPL package only, never
// a GPU's board power, even with nvidia-smi present; a CUDA device is
// charged its own GPU's power (nvidia-smi --id from its index).
func TestPowerPerDevice(t *testing.T) {
	dir := t.TempDir()
	smi := filepath.Join(dir, "nvidia-smi")
	script := "#!/bin/sh\nfor a in \"$@\"; do case $a in --id=1) echo 127.5; exit 0;; --id=*) echo 80.0; exit 0;; esac; done; printf '80.0\\n127.5\\n'\n"
	if err := os.WriteFile(smi, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	old := lookNvidiaSMI
	lookNvidiaSMI = func() (string, error) { return smi, nil }
	t.Cleanup(func() { lookNvidiaSMI = old })
	ctx := context.Background()
	if p := startPower(ctx, t.TempDir(), devices.Named("CPU")).stop(ctx); p.Source != "n/a" || p.Watts != 0 {
		t.Errorf("CPU guard without RAPL: %+v, want n/a (never the GPU's watts)", p)
	}
	if p := startPower(ctx, t.TempDir(), devices.Named("CUDA1")).stop(ctx); p.Source != "nvidia-smi" || p.Watts != 127.5 {
		t.Errorf("CUDA1: %+v, want GPU 1's 127.5 W", p)
	}
	if p := startPower(ctx, t.TempDir(), devices.Named("CUDA0")).stop(ctx); p.Watts != 80 {
		t.Errorf("CUDA0: %+v, want GPU 0's 80 W", p)
	}
}

func FuzzStreamSpeed(f *testing.F) {
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\ndata: [DONE]\n\n")
	f.Add("data: {\"choices\":[],\"timings\":{\"predicted_per_second\":1e309}}\n\n")
	f.Add(": ping\n\ndata: {bad\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		n := 0
		v, err := streamSpeed(strings.NewReader(s), func() time.Time { n++; return time.Unix(0, int64(n)*int64(time.Millisecond)) })
		if err == nil && !(v > 0) {
			t.Fatalf("speed %v without an error", v)
		}
	})
}
