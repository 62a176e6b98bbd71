package placement

import (
	"reflect"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

func TestParseDevice(t *testing.T) {
	cases := []struct {
		in      string
		want    devices.Device
		wantErr bool
	}{
		{"CUDA0:32GiB:dgpu", devices.Device{Name: "CUDA0", Kind: devices.KindDiscreteGPU, Memory: 32 << 30}, false},
		{"Vulkan1:8GiB:igpu", devices.Device{Name: "Vulkan1", Kind: devices.KindIntegratedGPU, Memory: 8 << 30}, false},
		{"cpu:64GiB", devices.Device{Name: "CPU", Kind: devices.KindCPU, Memory: 64 << 30}, false},
		{"CUDA0:24GB", devices.Device{Name: "CUDA0", Kind: devices.KindDiscreteGPU, Memory: 24e9}, false},
		{"CUDA0:24GiB:dgpu:936GB", devices.Device{Name: "CUDA0", Kind: devices.KindDiscreteGPU, Memory: 24 << 30, Bandwidth: 936e9}, false},
		{"CUDA0", devices.Device{}, true},
		{":8GiB", devices.Device{}, true},
		{"CUDA0:lots", devices.Device{}, true},
		{"CUDA0:8GiB:npu", devices.Device{}, true},
		{"CUDA0:0", devices.Device{}, true},
		{"a:1:cpu:2:3", devices.Device{}, true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseDevice(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v", err)
			}
			if !c.wantErr && !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func FuzzParseDevice(f *testing.F) {
	for _, s := range []string{"CUDA0:32GiB:dgpu", "Vulkan1:8GiB:igpu", "CPU:64GiB", "CUDA0:24GiB:dgpu:936GB", "::", "x:1e999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDevice(s)
		if err == nil && (d.Name == "" || d.Memory == 0) {
			t.Fatalf("accepted %q as %+v", s, d)
		}
	})
}

func TestBackend(t *testing.T) {
	for in, want := range map[string]string{"CUDA0": "CUDA", "Vulkan12": "Vulkan", "SYCL0": "SYCL", "CPU": "CPU", "ROCm1": "ROCm"} {
		if got := string(devices.BackendOf(in)); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// dense builds a uniform dense model of n layers of layerGiB each.
func dense(n int, layerGiB float64) Model {
	m := Model{Path: "/m/x.gguf", Architecture: "llama", Layers: uint64(n), ContextLength: 8192}
	for i := 0; i < n; i++ {
		b := uint64(layerGiB * (1 << 30))
		m.LayerBytes = append(m.LayerBytes, b)
		m.LayerExpertBytes = append(m.LayerExpertBytes, 0)
		m.WeightsBytes += b
	}
	m.OutputBytes = 1 << 28
	m.WeightsBytes += m.OutputBytes
	return m
}

// TestSlowdownGrowsWithIGPUShare checks the rule behind "a small iGPU
// fraction can cost ~10x" (FindingLayerSplitSequential): with the default
// bandwidths, 10% of the layers on the iGPU costs about 10x, the same on
// the CPU far less.
func TestSlowdownGrowsWithIGPUShare(t *testing.T) {
	m := dense(100, 0.1)
	r := Request{Model: m}
	g := devices.Device{Name: "CUDA0", Kind: devices.KindDiscreteGPU}
	ig := devices.Device{Name: "Vulkan1", Kind: devices.KindIntegratedGPU}
	cpu := devices.Device{Name: "CPU", Kind: devices.KindCPU}
	s10 := slowdown(r, g, ig, onGPUFromEnd(100, 90), false)
	if s10 < 8 || s10 > 12 {
		t.Errorf("10%% of layers on the iGPU: %.1fx, want about 10x", s10)
	}
	c10 := slowdown(r, g, cpu, onGPUFromEnd(100, 90), false)
	if c10 >= s10/2 {
		t.Errorf("CPU spill %.1fx not clearly below iGPU split %.1fx", c10, s10)
	}
	if s := slowdown(r, g, ig, onGPUFromEnd(100, 100), false); s < 0.999 || s > 1.001 {
		t.Errorf("all on GPU: %.2fx, want 1", s)
	}
	prev := 1.0
	for _, onGPU := range []uint64{95, 80, 50, 0} {
		s := slowdown(r, g, ig, onGPUFromEnd(100, onGPU), false)
		if s <= prev {
			t.Errorf("slowdown %.2f at %d GPU layers not above %.2f", s, onGPU, prev)
		}
		prev = s
	}
}

func TestAdviseRules(t *testing.T) {
	cases := []struct {
		name     string
		model    Model
		devs     []devices.Device
		kv       uint64
		strategy Strategy
		gpuLay   uint64
	}{
		{"fits with margin", dense(10, 1), []devices.Device{{Name: "CUDA0", Kind: devices.KindDiscreteGPU, Memory: 12 << 30}}, 0, Whole, 11},
		{"margin pushes the output head out", dense(10, 1), []devices.Device{{Name: "CUDA0", Kind: devices.KindDiscreteGPU, Memory: 11 << 30}}, 0, SpillLayers, 10},
		{"kv counts per layer", dense(10, 1), []devices.Device{{Name: "CUDA0", Kind: devices.KindDiscreteGPU, Memory: 11 << 30}}, 10 << 29, SpillLayers, 6},
		{"largest dgpu wins", dense(10, 1), []devices.Device{{Name: "CUDA1", Kind: devices.KindDiscreteGPU, Memory: 4 << 30}, {Name: "CUDA0", Kind: devices.KindDiscreteGPU, Memory: 24 << 30}}, 0, Whole, 11},
		{"gpu too small: cpu", dense(10, 1), []devices.Device{{Name: "CUDA0", Kind: devices.KindDiscreteGPU, Memory: 1 << 30}, {Name: "CPU", Kind: devices.KindCPU, Memory: 64 << 30}}, 0, CPUOnly, 0},
		{"no devices: cpu, memory unknown", dense(10, 1), nil, 0, CPUOnly, 0},
		{"igpu only: cpu", dense(10, 1), []devices.Device{{Name: "Vulkan0", Kind: devices.KindIntegratedGPU, Memory: 16 << 30}, {Name: "CPU", Kind: devices.KindCPU, Memory: 32 << 30}}, 0, CPUOnly, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Advise(Request{Model: c.model, Devices: c.devs, Ctx: 4096, Parallel: 1, KVType: "f16", KVBytes: c.kv})
			if p.Strategy != c.strategy || p.GPULayers != c.gpuLay {
				t.Errorf("strategy %s, %d GPU layers; want %s, %d\n%+v", p.Strategy, p.GPULayers, c.strategy, c.gpuLay, p.Recommendations)
			}
			if len(p.Command) == 0 || !strings.HasPrefix(p.CommandLine, "llama-server -m /m/x.gguf") {
				t.Errorf("command %q", p.CommandLine)
			}
		})
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"llama-server", "-m", "/my models/x's.gguf", "-c", "4096", ""})
	want := `llama-server -m '/my models/x'\''s.gguf' -c 4096 ''`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestEnumStrings(t *testing.T) {
	for _, s := range []interface{ String() string }{devices.KindCPU, devices.KindIntegratedGPU, devices.KindDiscreteGPU, devices.Kind(9), Info, Warning, Error, Severity(9),
		Whole, SpillLayers, SpillExpert, CPUOnly, NoFit, Strategy(9)} {
		if s.String() == "" {
			t.Errorf("%#v has no name", s)
		}
	}
}

func BenchmarkAdvise(b *testing.B) {
	m := dense(80, 0.45)
	devs := []devices.Device{{Name: "CUDA0", Kind: devices.KindDiscreteGPU, Memory: 24 << 30}, {Name: "Vulkan1", Kind: devices.KindIntegratedGPU, Memory: 8 << 30}, {Name: "CPU", Kind: devices.KindCPU, Memory: 64 << 30}}
	for b.Loop() {
		_ = Advise(Request{Model: m, Devices: devs, Ctx: 8192, Parallel: 1, KVType: "f16", KVBytes: 2 << 30, Guard: &Guard{Name: "g", Bytes: 2 << 30}})
	}
}
