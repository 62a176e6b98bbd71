package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// TestDevicesTestbed runs `aegis devices --json` on this machine with the
// testbed's real llama-server: Vulkan0 (llvmpipe) must be listed and
// classified as a software device, not a GPU.
func TestDevicesTestbed(t *testing.T) {
	env := testbed.Require(t, "llama-vulkan")
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"devices", "--json", "--llama-server", env.LlamaServer, "--env", "GGML_VK_VISIBLE_DEVICES=0"}, &IO{Out: &out, Err: &errb})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r devices.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.CPU.Threads < 1 || r.CPU.MemTotal < 1 {
		t.Errorf("cpu: %+v", r.CPU)
	}
	var found bool
	for _, d := range r.Runtime {
		if d.Name == "Vulkan0" {
			found = true
			if d.Class.Label != devices.ClassSoftware {
				t.Errorf("Vulkan0 class %q, want software", d.Class.Label)
			}
		}
	}
	if !found {
		t.Errorf("Vulkan0 not listed: %+v (err %s)", r.Runtime, r.RuntimeErr)
	}
}

func TestDevicesBadEnv(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"devices", "--env", "NOEQUALS"}, &IO{Out: &out, Err: &errb}); code != ExitUsage {
		t.Errorf("exit %d, want %d", code, ExitUsage)
	}
}
