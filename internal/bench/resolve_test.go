package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeServer writes a llama-server stand-in that lists a CUDA device, and
// Vulkan0 (llvmpipe) only when GGML_VK_VISIBLE_DEVICES=0, as ggml does.
func fakeServer(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "llama-server")
	script := `#!/bin/sh
echo "ggml_cuda_init: found 1 CUDA devices" >&2
echo "Available devices:"
echo "  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23549 MiB free)"
if [ "$GGML_VK_VISIBLE_DEVICES" = 0 ]; then echo "  Vulkan0: llvmpipe (LLVM 22.1.8, 256 bits) (24105 MiB, 23277 MiB free)"; fi
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestResolveDevices(t *testing.T) {
	bin := fakeServer(t)
	cases := []struct {
		name    string
		devs    []string
		env     []string
		want    []string // name and env, "CUDA0|" style
		wantErr string
	}{
		{"cpu aliases", []string{"CPU", "none"}, nil, []string{"none|", "none|"}, ""},
		{"listed device", []string{"CPU", "CUDA0"}, nil, []string{"none|", "CUDA0|"}, ""},
		{"hidden llvmpipe gets the env", []string{"Vulkan0"}, nil, []string{"Vulkan0|GGML_VK_VISIBLE_DEVICES=0"}, ""},
		{"user env wins", []string{"Vulkan0"}, []string{"GGML_VK_VISIBLE_DEVICES=0"}, []string{"Vulkan0|GGML_VK_VISIBLE_DEVICES=0"}, ""},
		{"unknown device", []string{"SYCL0"}, nil, nil, "does not list device SYCL0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveDevices(context.Background(), bin, tc.devs, tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, d := range got {
				s = append(s, d.Name+"|"+strings.Join(d.Env, ","))
			}
			if !slices.Equal(s, tc.want) {
				t.Errorf("got %v, want %v", s, tc.want)
			}
		})
	}
	c, err := Candidates(context.Background(), bin, []string{"GGML_VK_VISIBLE_DEVICES=0"})
	if err != nil || len(c) != 3 || !c[0].IsCPU() || c[2].Name != "Vulkan0" {
		t.Errorf("Candidates = %+v, %v", c, err)
	}
}
