package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

// ResolveDevices turns device names ("CPU", "Vulkan0", "SYCL0") into
// devices, checking them against what binary lists; each GPU comes as
// listed, so its free memory is the supervisor's budget. env is
// added to every GPU device. A Vulkan device that only appears when
// GGML_VK_VISIBLE_DEVICES names it (ggml hides CPU-type Vulkan devices
// such as llvmpipe by default) gets that variable. Without a binary the
// names are taken as given.
func ResolveDevices(ctx context.Context, binary string, names []string, env []string) ([]devices.Device, error) {
	var out []devices.Device
	var listed []devices.Device
	var listErr error
	if binary != "" {
		listed, listErr = devices.ListDevices(ctx, binary, env, 0)
	}
	for _, raw := range names {
		name := strings.TrimSpace(raw)
		if name == "" {
			continue
		}
		d := devices.Named(name)
		if d.IsCPU() {
			out = append(out, devices.Named("none"))
			continue
		}
		d.Env = slices.Clone(env)
		if binary == "" {
			out = append(out, d)
			continue
		}
		if l, ok := find(listed, name); ok {
			l.Env = d.Env // as listed: its free memory bounds what the supervisor starts
			out = append(out, l)
			continue
		}
		if n, ok := strings.CutPrefix(name, "Vulkan"); ok && !hasEnv(env, "GGML_VK_VISIBLE_DEVICES") {
			if _, err := strconv.Atoi(n); err == nil {
				e := append(slices.Clone(env), "GGML_VK_VISIBLE_DEVICES="+n)
				if l, err := devices.ListDevices(ctx, binary, e, 0); err == nil {
					if ld, ok := find(l, name); ok {
						ld.Env = e
						out = append(out, ld)
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

func find(l []devices.Device, name string) (devices.Device, bool) {
	for _, d := range l {
		if d.Name == name {
			return d, true
		}
	}
	return devices.Device{}, false
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
func Candidates(ctx context.Context, binary string, env []string) ([]devices.Device, error) {
	listed, err := devices.ListDevices(ctx, binary, env, 0)
	if err != nil {
		return nil, err
	}
	out := []devices.Device{devices.Named("none")}
	for _, d := range listed {
		d.Env = slices.Clone(env)
		out = append(out, d)
	}
	return out, nil
}
