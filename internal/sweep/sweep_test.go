package sweep

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs:\n%s", path, got)
	}
}

func TestParseSet(t *testing.T) {
	cases := []struct {
		in      string
		want    Set
		wantErr bool
	}{
		{"cpu: -dev none", Set{Name: "cpu", Flags: []string{"-dev", "none"}}, false},
		{"vk: GGML_VK_VISIBLE_DEVICES=0 -dev Vulkan0 -ngl 99",
			Set{Name: "vk", Env: []string{"GGML_VK_VISIBLE_DEVICES=0"}, Flags: []string{"-dev", "Vulkan0", "-ngl", "99"}}, false},
		{"draft: -md '/my models/d.gguf' -devd Vulkan1", Set{Name: "draft", Flags: []string{"-md", "/my models/d.gguf", "-devd", "Vulkan1"}}, false},
		{"fork: -ctk q8_0 -ctv turbo4 --overlap=async", Set{Name: "fork", Flags: []string{"-ctk", "q8_0", "-ctv", "turbo4", "--overlap=async"}}, false},
		{"empty:", Set{Name: "empty"}, false},
		{"-dev none", Set{}, true},
		{": -dev none", Set{}, true},
		{"q: -m 'unterminated", Set{}, true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseSet(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v", err)
			}
			if !c.wantErr && !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %#v, want %#v", got, c.want)
			}
		})
	}
}

func FuzzParseSet(f *testing.F) {
	for _, s := range []string{"cpu: -dev none", "vk: A=1 -dev Vulkan0", "x: 'a b' \"c\"", "::", "q: 'x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseSet(s)
		if err == nil && set.Name == "" {
			t.Fatalf("accepted %q without a name", s)
		}
	})
}

func TestParseSets(t *testing.T) {
	cases := []struct {
		name    string
		yaml    string
		want    int
		wantErr bool
	}{
		{"two sets", "sets:\n  - name: cpu\n    flags: [-dev, none]\n  - name: vk\n    env: [GGML_VK_VISIBLE_DEVICES=0]\n    flags: [-dev, Vulkan0]\n    bench_flags: [-fa, '1']\n    server_flags: [-fa, 'on']\n", 2, false},
		{"server only", "sets:\n  - name: draft\n    flags: [-md, d.gguf]\n    skip_bench: true\n", 1, false},
		{"unknown field", "sets:\n  - name: a\n    flagz: [x]\n", 0, true},
		{"no name", "sets:\n  - flags: [x]\n", 0, true},
		{"bad env", "sets:\n  - name: a\n    env: [notenv]\n", 0, true},
		{"empty", "sets: []\n", 0, true},
		{"not yaml", "{{{", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseSets([]byte(c.yaml), "t.yaml")
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v", err)
			}
			if len(got) != c.want {
				t.Errorf("%d sets, want %d", len(got), c.want)
			}
		})
	}
}

func FuzzParseSets(f *testing.F) {
	f.Add([]byte("sets:\n  - name: cpu\n    flags: [-dev, none]\n"))
	f.Add([]byte("sets: [{name: a, env: [A=1]}]"))
	f.Add([]byte("&a [*a, *a]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sets, err := parseSets(b, "f.yaml")
		if err == nil && len(sets) == 0 {
			t.Fatal("no error and no sets")
		}
	})
}

// TestParseLoadLog reads a real llama-server log (stories260K on the CPU,
// testbed build 11669).
func TestParseLoadLog(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "stories-cpu-load.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := ParseLoadLog(f)
	mib := func(x float64) uint64 { return uint64(x * (1 << 20)) }
	if l.ModelBytes != mib(1.12) || l.KVBytes != mib(1.25) || l.ComputeBytes != mib(3.65) {
		t.Errorf("got %+v", l)
	}
	if l.Model["CPU_Mapped"] != mib(1.12) || l.KV["CPU"] != mib(1.25) {
		t.Errorf("per buffer: %+v", l)
	}
	multi := "load_tensors:   CPU_Mapped model buffer size =   100.00 MiB\nload_tensors:      Vulkan0 model buffer size =   300.50 MiB\n" +
		"llama_kv_cache:    Vulkan0 KV buffer size =    64.00 MiB\nllama_kv_cache:        CPU KV buffer size =    16.00 MiB\n" +
		"sched_reserve:    Vulkan0 compute buffer size =    20.00 MiB\nsched_reserve: Vulkan_Host compute buffer size = 2.00 MiB\n" +
		"llama_kv_cache: size =   80.00 MiB (  2048 cells,   5 layers,  1/1 seqs)\n"
	l = ParseLoadLog(strings.NewReader(multi))
	if l.ModelBytes != mib(400.5) || l.KVBytes != mib(80) || l.ComputeBytes != mib(22) || len(l.Model) != 2 {
		t.Errorf("multi-device: %+v", l)
	}
	if l.Total() != mib(400.5)+mib(80)+mib(22) {
		t.Errorf("total %d", l.Total())
	}
	long := strings.Repeat("x", maxLogLine+10) + "\nload_tensors:   CPU_Mapped model buffer size =     2.00 MiB\n"
	if l := ParseLoadLog(strings.NewReader(long)); l.ModelBytes == 0 {
		t.Log("a line after an overlong line may be lost; it was")
	}
}

func FuzzParseLoadLog(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "stories-cpu-load.log")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(" CPU model buffer size = 99999999999999999999.9 MiB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = ParseLoadLog(bytes.NewReader(b))
	})
}

func TestParseBenchJSON(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "bench-split.json"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ParseBenchJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	pp, tg, n := Speeds(rows)
	if len(rows) != 2 || pp <= 0 || tg <= 0 || n != 32 || rows[0].Devices != "Vulkan0" || rows[0].NGPULayers != 2 {
		t.Errorf("rows %+v pp %v tg %v n %d", rows, pp, tg, n)
	}
	for _, bad := range []string{"", "{}", "[{\"avg_ts\": \"fast\"}]"} {
		if _, err := ParseBenchJSON([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if rows, err := ParseBenchJSON([]byte(`[{"n_prompt":512,"n_gen":0,"avg_ts":10,"future_field":{"x":1}}]`)); err != nil || rows[0].AvgTs != 10 {
		t.Errorf("unknown fields: %v %v", rows, err)
	}
}

func FuzzParseBenchJSON(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "bench-split.json")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := ParseBenchJSON(b)
		if err == nil {
			_, _, _ = Speeds(rows)
		}
	})
}

func sampleResults() []Result {
	rs := []Result{
		{Set: Set{Name: "cpu"}, PP: 18000, TG: 10000, PPTokens: 512, SpeedSource: SpeedBench, TTFT: 20 * time.Millisecond, TTFTSource: TTFTServer, MemoryBytes: 6 << 20, MemorySource: MemoryServerLog},
		{Set: Set{Name: "vulkan"}, PP: 1200, TG: 140, TTFT: 400 * time.Millisecond, TTFTSource: TTFTServer, MemoryBytes: 8 << 20, MemorySource: MemoryServerLog},
		{Set: Set{Name: "split"}, PP: 900, TG: 120, TTFT: 28 * time.Millisecond, TTFTSource: TTFTPPDerived, MemoryBytes: 1 << 20, MemorySource: MemoryBenchModel},
		{Set: Set{Name: "broken"}, Err: "llama-bench: exit status 1"},
	}
	Ratios(rs)
	return rs
}

func TestRatiosAndReport(t *testing.T) {
	rs := sampleResults()
	if rs[0].PPRatio != 1 || rs[1].TGRatio != 0.014 || rs[3].PPRatio != 0 {
		t.Errorf("ratios: %+v", rs)
	}
	var tbl, svg bytes.Buffer
	if err := WriteTable(&tbl, rs); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "table.golden"), tbl.Bytes())
	if err := WriteSVG(&svg, "sweep <test>", rs); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "chart.golden.svg"), svg.Bytes())
	if !strings.Contains(svg.String(), "sweep &lt;test&gt;") {
		t.Error("title not escaped")
	}
}

func TestRunErrors(t *testing.T) {
	if _, err := Run(context.Background(), Config{}); err != ErrNoSets {
		t.Errorf("no sets: %v", err)
	}
	if _, err := Run(context.Background(), Config{Sets: []Set{{Name: "a"}}}); err == nil {
		t.Error("no engines accepted")
	}
	// A missing binary fails the set, not the sweep.
	rs, err := Run(context.Background(), Config{Model: "/x.gguf", Sets: []Set{{Name: "a"}},
		Bench: &Engine{Path: filepath.Join(t.TempDir(), "no-such-llama-bench")}})
	if err != nil || len(rs) != 1 || rs[0].Err == "" {
		t.Errorf("rs %+v err %v", rs, err)
	}
}
