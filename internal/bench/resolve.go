package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/supervisor"
)

// ResolveDevices turns device names ("CPU", "Vulkan0", "SYCL0") into
// supervisor devices, checking them against what binary lists; each GPU's
// memory budget is the free memory the binary reports. env is
// added to every GPU device. A Vulkan device that only appears when
// GGML_VK_VISIBLE_DEVICES names it (ggml hides CPU-type Vulkan devices
// such as llvmpipe by default) gets that variable. Without a binary the
// names are taken as given.
func ResolveDevices(ctx context.Context, binary string, names []string, env []string) ([]supervisor.Device, error) {
	var out []supervisor.Device
	var listed []devices.RuntimeDevice
	var listErr error
	if binary != "" {
		listed, listErr = devices.ListDevices(ctx, binary, env, 0)
	}
	for _, raw := range names {
		name := strings.TrimSpace(raw)
		if name == "" {
			continue
		}
		d := supervisor.Device{Name: name}
		if d.IsCPU() {
			out = append(out, supervisor.Device{Name: "none"})
			continue
		}
		d.Env = slices.Clone(env)
		if binary == "" {
			out = append(out, d)
			continue
		}
		if l, ok := find(listed, name); ok {
			d.BudgetMiB = l.Free // refuse what cannot fit in free device memory
			out = append(out, d)
			continue
		}
		if n, ok := strings.CutPrefix(name, "Vulkan"); ok && !hasEnv(env, "GGML_VK_VISIBLE_DEVICES") {
			if _, err := strconv.Atoi(n); err == nil {
				e := append(slices.Clone(env), "GGML_VK_VISIBLE_DEVICES="+n)
				if l, err := devices.ListDevices(ctx, binary, e, 0); err == nil {
					if ld, ok := find(l, name); ok {
						d.Env, d.BudgetMiB = e, ld.Free
						out = append(out, d)
						continue
					}
				}
			}
		}
		if listErr != nil {
			return nil, fmt.Errorf("bench: device %s: %w", name, listErr)
		}
		var names []string
		for _, l := range listed {
			names = append(names, l.Name)
		}
		return nil, fmt.Errorf("bench: %s does not list device %s (it lists: CPU %s)", binary, name, strings.Join(names, " "))
	}
	return out, nil
}

func find(l []devices.RuntimeDevice, name string) (devices.RuntimeDevice, bool) {
	for _, d := range l {
		if d.Name == name {
			return d, true
		}
	}
	return devices.RuntimeDevice{}, false
}

func hasEnv(env []string, key string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, key+"=") {
			return true
		}
	}
	return false
}

// Candidates lists the devices AutoPlace should try for `--guard-device
// auto`: the CPU and every device binary lists with env (software
// devices included: the measurement, not the class, rules them out).
func Candidates(ctx context.Context, binary string, env []string) ([]supervisor.Device, error) {
	listed, err := devices.ListDevices(ctx, binary, env, 0)
	if err != nil {
		return nil, err
	}
	out := []supervisor.Device{{Name: "none"}}
	for _, d := range listed {
		out = append(out, supervisor.Device{Name: d.Name, Env: slices.Clone(env), BudgetMiB: d.Free})
	}
	return out, nil
}
