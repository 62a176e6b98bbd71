package bench

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

func TestInterpret(t *testing.T) {
	cases := []struct {
		name     string
		ratio    float64
		unstable bool
		want     string
	}{
		{"llvmpipe-like", 0.1, false, VerdictSlower},
		{"slower even if noisy", 0.5, true, VerdictSlower},
		{"equal", 1.0, false, VerdictEqual},
		{"noisy equal", 1.0, true, VerdictExperimental},
		{"1.3x", 1.3, false, VerdictPlausible},
		{"2.2x", 2.2, false, VerdictUseful},
		{"3.5x", 3.5, false, VerdictStrong},
		{"noisy 3x", 3.5, true, VerdictExperimental},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Interpret(tc.ratio, tc.unstable); got != tc.want {
				t.Errorf("Interpret(%v, %v) = %q, want %q", tc.ratio, tc.unstable, got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	s := summarize([]float64{3, 1, 2, 10})
	if s.N != 4 || s.Median != 2.5 || s.Min != 1 || s.Max != 10 || s.Mean != 4 {
		t.Errorf("%+v", s)
	}
	if s.CV < 1 || s.CV > 1.1 {
		t.Errorf("cv %v", s.CV)
	}
	if z := summarize(nil); z.N != 0 {
		t.Errorf("%+v", z)
	}
}

func TestRecommend(t *testing.T) {
	mk := func(dev, interp string, ratio, load float64) DeviceResult {
		return DeviceResult{Device: dev, Interpretation: interp, Ratio: ratio, Load: Load{SystemPct: load}}
	}
	cases := []struct {
		name string
		ds   []DeviceResult
		want string
	}{
		{"llvmpipe slower", []DeviceResult{mk("CPU", VerdictBaseline, 1, 100), mk("Vulkan0", VerdictSlower, 0.1, 100)}, "CPU"},
		{"780M plausible", []DeviceResult{mk("CPU", VerdictBaseline, 1, 90), mk("Vulkan0", VerdictPlausible, 1.4, 20)}, "Vulkan0"},
		{"best of two", []DeviceResult{mk("CPU", VerdictBaseline, 1, 90), mk("Vulkan0", VerdictPlausible, 1.4, 20), mk("CUDA0", VerdictStrong, 5, 10)}, "CUDA0"},
		{"equal but frees the CPU", []DeviceResult{mk("CPU", VerdictBaseline, 1, 95), mk("SYCL0", VerdictEqual, 1.05, 30)}, "SYCL0"},
		{"equal and busy", []DeviceResult{mk("CPU", VerdictBaseline, 1, 95), mk("SYCL0", VerdictEqual, 1.05, 90)}, "CPU"},
		{"unstable", []DeviceResult{mk("CPU", VerdictBaseline, 1, 95), mk("Vulkan1", VerdictExperimental, 2.5, 10)}, "CPU"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := recommend(tc.ds); got != tc.want {
				t.Errorf("recommend = %s (%s), want %s", got, why, tc.want)
			}
		})
	}
}

func TestParseLlamaBenchJSON(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "llama-bench-cpu.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Some builds print log lines before the JSON.
	rows, err := ParseLlamaBenchJSON(append([]byte("load_backend: loaded CPU backend\n"), b...))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Test() != "pp512" || rows[1].Test() != "tg16" {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if r.AvgTS <= 0 || r.NThreads != 1 || r.NBatch != 2048 || r.NUBatch != 512 || r.BestTS() < r.AvgTS {
			t.Errorf("row %+v", r)
		}
	}
	if _, err := ParseLlamaBenchJSON([]byte("error: failed to load model")); err == nil {
		t.Error("no error without JSON")
	}
}

func TestParseProcStat(t *testing.T) {
	cases := []struct {
		name        string
		in          string
		busy, total uint64
		ok          bool
	}{
		{"linux 6", "cpu  100 5 50 800 20 1 2 3 7 0\ncpu0 1 2 3 4\n", 161, 981, true},
		{"short", "cpu  1 2 3 4\n", 6, 10, true},
		{"not cpu", "intr 1 2 3\n", 0, 0, false},
		{"garbage", "cpu  a b c d e\n", 0, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseProcStat(tc.in)
			if ok != tc.ok || got.busy != tc.busy || got.total != tc.total {
				t.Errorf("got %+v %v, want busy %d total %d %v", got, ok, tc.busy, tc.total, tc.ok)
			}
		})
	}
}

func TestParsePidStat(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want uint64
		ok   bool
	}{
		{"plain", "1234 (llama-server) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 4 0 100 0", 280, true},
		{"spaces and parens in comm", "99 (a (b) c) R 1 1 1 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 0", 10, true},
		{"truncated", "1 (x) S 1 2", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parsePidStat(tc.in)
			if ok != tc.ok || got != tc.want {
				t.Errorf("got %d %v, want %d %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add("cpu  100 5 50 800 20 1 2 3 7 0\n")
	f.Add("1234 (llama-server) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 4 0 100 0")
	f.Fuzz(func(t *testing.T, s string) {
		if c, ok := parseProcStat(s); ok && c.busy > c.total {
			t.Fatalf("busy %d > total %d", c.busy, c.total)
		}
		parsePidStat(s)
	})
}

func FuzzParseLlamaBenchJSON(f *testing.F) {
	b, _ := os.ReadFile(filepath.Join("testdata", "llama-bench-cpu.json"))
	f.Add(b)
	f.Add([]byte("[]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := ParseLlamaBenchJSON(b)
		if err != nil && rows != nil {
			t.Fatal("rows with error")
		}
		for _, r := range rows {
			_ = r.Test()
			_ = r.BestTS()
		}
	})
}

// TestRAPLEnergy reads a recorded powercap tree whose counter moves (and
// wraps) between the two readings.
func TestRAPLEnergy(t *testing.T) {
	root := t.TempDir()
	pkg := filepath.Join(root, "sys", "class", "powercap", "intel-rapl:0")
	sub := filepath.Join(root, "sys", "class", "powercap", "intel-rapl:0:0") // core: not summed
	for _, d := range []string{pkg, sub} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(d, name, v string) {
		if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(pkg, "max_energy_range_uj", "100000000")
	write(pkg, "name", "package-0")
	write(pkg, "energy_uj", "99000000")
	write(sub, "name", "core")
	write(sub, "energy_uj", "5")
	pm := startPower(context.Background(), root, devices.Named("CPU"))
	write(pkg, "energy_uj", "1000000") // wrapped: 1 J to the top + 1 J
	write(sub, "energy_uj", "500005")  // 0.5 J in the cores, part of the package
	p := pm.stop(context.Background())
	if p.Source != "rapl" || p.Joules < 1.99 || p.Joules > 2.01 || p.Watts <= 0 {
		t.Errorf("power %+v", p)
	}
	if p.Domains["core"] != 0.5 || p.Domains["package-0"] < 1.99 {
		t.Errorf("domains %v", p.Domains)
	}
	if p := startPower(context.Background(), t.TempDir(), devices.Named("CPU")).stop(context.Background()); p.Source != "n/a" {
		t.Errorf("no RAPL: %+v", p)
	}
}

func TestPlacementCacheAndKey(t *testing.T) {
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(model, bytes.Repeat([]byte("gguf"), 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	cpu := []devices.Device{{Name: "none"}}
	vk := []devices.Device{{Name: "none"}, {Name: "Vulkan0", Env: []string{"GGML_VK_VISIBLE_DEVICES=0"}}}
	k1, err := placementKey(model, cpu, "b1")
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := placementKey(model, vk, "b1")
	k3, _ := placementKey(model, vk, "b2")
	if k1 == k2 || k2 == k3 {
		t.Errorf("keys do not separate devices/versions: %s %s %s", k1, k2, k3)
	}
	if again, _ := placementKey(model, cpu, "b1"); again != k1 {
		t.Error("key is not stable")
	}
	path := filepath.Join(t.TempDir(), "aegis", "placement.json")
	if _, ok := readCache(path, k1); ok {
		t.Error("empty cache hit")
	}
	if err := writeCache(path, k1, &Placement{Device: "CPU", Ratio: 1}); err != nil {
		t.Fatal(err)
	}
	if err := writeCache(path, k2, &Placement{Device: "Vulkan0", Ratio: 1.5}); err != nil {
		t.Fatal(err)
	}
	if p, ok := readCache(path, k1); !ok || p.Device != "CPU" {
		t.Errorf("k1: %+v %v", p, ok)
	}
	if p, ok := readCache(path, k2); !ok || p.Device != "Vulkan0" {
		t.Errorf("k2: %+v %v", p, ok)
	}
}

func sampleReport() *Report {
	return &Report{
		Model: "m.gguf", Threads: 1, Reps: 3, Recommendation: "CPU", Reason: "no device beats the CPU <by> the margin",
		Devices: []DeviceResult{
			{Device: "CPU", SpeedSource: SourceLlamaBench,
				DeviceSpeed: map[string]Stat{"pp512": {Median: 9100, Max: 9300}, "tg16": {Median: 8000, Max: 9000}},
				Served:      map[string]Stat{"pp512": {Median: 9000, Max: 9500}, "tg16": {Median: 6000, Max: 6500}},
				ServedShare: map[string]float64{"pp512": 1.02, "tg16": 0.72}, ServerOverheadUS: map[string]float64{"tg16": 42.7},
				ServerOverheadNoiseUS: map[string]float64{"tg16": 13.9},
				VerdictMS:             Stat{N: 3, Median: 100}, Ratio: 1, Interpretation: VerdictBaseline, Load: Load{SystemPct: 60, ServerCores: 0.6}},
			{Device: "Vulkan0", SpeedSource: SourceServer, LlamaBenchError: "exit status 1",
				DeviceSpeed: map[string]Stat{"pp512": {Median: 1000}, "tg16": {Median: 300}},
				Served:      map[string]Stat{"pp512": {Median: 1000}, "tg16": {Median: 300}},
				VerdictMS:   Stat{N: 3, Median: 950}, Ratio: 0.1, Interpretation: VerdictSlower, Load: Load{SystemPct: -1, ServerCores: -1}},
		},
	}
}

func TestReportWriters(t *testing.T) {
	rep := sampleReport()
	var tab bytes.Buffer
	if err := rep.WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pp512 t/s", "tg16 t/s", VerdictSlower, "recommendation: guard on CPU",
		"speed from", "served by llama-server (its own timings, medians, t/s): pp512 9000, tg16 6000",
		"served / device speed (fastest round of each): pp512 102%, tg16 72%; server overhead per token (± llama-bench's own spread): tg16 +43 µs (±14)",
		"speeds are llama-server's own timings (llama-bench failed: exit status 1)"} {
		if !strings.Contains(tab.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tab.String())
		}
	}
	if strings.Index(tab.String(), "pp512 t/s") > strings.Index(tab.String(), "tg16 t/s") {
		t.Error("tg before pp")
	}
	var svg bytes.Buffer
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&svg)
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v", err)
		}
	}
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "<svg") || !strings.Contains(page.String(), "&lt;by&gt;") {
		t.Error("HTML lacks the chart or does not escape")
	}
}

func TestPlaceJudgesTimedOutDevicesSlower(t *testing.T) {
	cpu := Candidate{Device: "CPU", VerdictMS: 90}
	tests := []struct {
		name      string
		cands     []Candidate
		wantErr   bool
		device    string
		interpret string // of the second candidate
	}{
		{"faster device wins", []Candidate{cpu, {Device: "Vulkan0", VerdictMS: 30}}, false, "Vulkan0", VerdictStrong},
		{"timed out is slower", []Candidate{cpu, {Device: "Vulkan0", VerdictMS: 60000, TimedOut: true, Error: "timeout"}}, false, "CPU", VerdictSlower},
		{"crashed is an error", []Candidate{cpu, {Device: "Vulkan0", Error: "connection refused"}}, false, "CPU", "error"},
		{"cpu failed", []Candidate{{Device: "CPU", Error: "exit 1"}, {Device: "Vulkan0", VerdictMS: 30}}, true, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := place(tt.cands)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("placed %+v, want an error", p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Device != tt.device || p.Candidates[1].Interpretation != tt.interpret {
				t.Errorf("device %s, second %q; want %s, %q", p.Device, p.Candidates[1].Interpretation, tt.device, tt.interpret)
			}
		})
	}
}

// A server that answers too late is a timeout; one that refuses is not.
func TestIsTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	_, _, err := server{base: slow.URL, c: &http.Client{Timeout: 50 * time.Millisecond}}.verdict(context.Background(), 0)
	if err == nil || !isTimeout(err) {
		t.Errorf("stalled server: err %v, want a timeout", err)
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	_, _, err = server{base: dead.URL, c: &http.Client{Timeout: time.Second}}.verdict(context.Background(), 0)
	if err == nil || isTimeout(err) {
		t.Errorf("closed server: err %v, want an error that is not a timeout", err)
	}
}
