package llamaproc

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

// listed returns device name as the recorded --list-devices output of a
// machine (internal/devices/testdata/listdevices) lists it.
func listed(t *testing.T, machine, name string) devices.Device {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "devices", "testdata", "listdevices", machine+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := devices.ParseListDevices(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("%s does not list %s", machine, name)
	return devices.Device{}
}

func TestLaunchCommandPerDeviceKind(t *testing.T) {
	const base = "-m /m/guard.gguf --host 127.0.0.1 --port 8123 -c 2048 -np 1 --no-webui -t 4"
	cases := []struct {
		name    string
		machine string // recorded --list-devices output; "" for the CPU
		device  string
		env     []string // the device's own environment
		args    string
		wantEnv []string
	}{
		{name: "cpu", device: "CPU", args: base + " -dev none -ngl 0 --jinja"},
		{name: "cpu as none", device: "none", args: base + " -dev none -ngl 0 --jinja"},
		{name: "vulkan dgpu", machine: "vulkan-3090-780m", device: "Vulkan0", args: base + " -dev Vulkan0 -ngl 99 --jinja"},
		{name: "vulkan software rasterizer", machine: "vulkan-llvmpipe", device: "Vulkan0", env: []string{"GGML_VK_VISIBLE_DEVICES=0"},
			args: base + " -dev Vulkan0 -ngl 99 --jinja", wantEnv: []string{"GGML_VK_VISIBLE_DEVICES=0"}},
		{name: "cuda", machine: "cuda-4090-uhd770", device: "CUDA0", args: base + " -dev CUDA0 -ngl 99 --jinja"},
		{name: "sycl igpu recipe", machine: "sycl-mtl-arc", device: "SYCL0",
			args:    base + " -dev SYCL0 -ngl 99 -fa off -ctk f16 -ctv f16 --jinja",
			wantEnv: []string{"SYCL_CACHE_PERSISTENT=0", "GGML_SYCL_DISABLE_DNN=1"}},
		{name: "rocm", machine: "rocm-780m", device: "ROCm0", args: base + " -dev ROCm0 -ngl 99 --jinja"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := devices.Named(tc.device)
			if tc.machine != "" {
				d = listed(t, tc.machine, tc.device)
			}
			d.Env = tc.env
			l := Launch{Binary: "llama-server", Model: "/m/guard.gguf", Port: 8123, CtxSize: 2048, Parallel: 1, Threads: 4,
				Device: d, Args: []string{"--jinja"}}
			args, env := l.Command()
			if got := strings.Join(args, " "); got != tc.args {
				t.Errorf("args\n got %s\nwant %s", got, tc.args)
			}
			if !slices.Equal(env, tc.wantEnv) {
				t.Errorf("env %q, want %q", env, tc.wantEnv)
			}
			s := l.Spec(nil)
			if s.Path != "llama-server" || !slices.Equal(s.Args, args) || !slices.Equal(s.Env, env) {
				t.Errorf("spec %+v does not match the command", s)
			}
		})
	}
}

// A launch without a device pins nothing and leaves the sizes to the
// server: the sweep's sets carry their own -dev.
func TestLaunchCommandUnpinned(t *testing.T) {
	l := Launch{Binary: "llama-server", Model: "m.gguf", Port: 9, Env: []string{"A=1"},
		Args: []string{"-lv", "4", "-dev", "Vulkan0", "-ngl", "99"}}
	args, env := l.Command()
	if got, want := strings.Join(args, " "), "-m m.gguf --host 127.0.0.1 --port 9 --no-webui -lv 4 -dev Vulkan0 -ngl 99"; got != want {
		t.Errorf("args\n got %s\nwant %s", got, want)
	}
	if !slices.Equal(env, []string{"A=1"}) {
		t.Errorf("env %q", env)
	}
}
