package testbed

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		wantErr bool
		wantCPU string
	}{
		{name: "full", file: "# comment\nAEGIS_TESTBED_LLAMA_CPU_URL=http://127.0.0.1:1\nAEGIS_TESTBED_OLLAMA_URL=http://127.0.0.1:2\n", wantCPU: "http://127.0.0.1:1"},
		{name: "empty file", file: "", wantErr: true},
		{name: "bad line", file: "NOEQUALS\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "env")
			if err := os.WriteFile(p, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv("AEGIS_TESTBED_ENV", p)
			for _, k := range []string{"AEGIS_TESTBED_LLAMA_CPU_URL", "AEGIS_TESTBED_LLAMA_VULKAN_URL", "AEGIS_TESTBED_OLLAMA_URL"} {
				if v, ok := os.LookupEnv(k); ok {
					os.Unsetenv(k)
					t.Cleanup(func() { os.Setenv(k, v) })
				}
			}
			e, err := Load()
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && e.LlamaCPUURL != tt.wantCPU {
				t.Fatalf("cpu url %q, want %q", e.LlamaCPUURL, tt.wantCPU)
			}
		})
	}
}
