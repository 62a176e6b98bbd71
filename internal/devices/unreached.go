package devices

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// discoverSMI asks nvidia-smi about the NVIDIA GPUs on the bus (or reads
// o.SMIOutput) and attaches its answers. No NVIDIA GPU, or no nvidia-smi
// on PATH, is not an error.
func discoverSMI(ctx context.Context, r *Report, o Options, root string) error {
	hasNVIDIA := false
	for _, g := range r.GPUs {
		hasNVIDIA = hasNVIDIA || g.VendorID == fmt.Sprintf("%04x", VendorNVIDIA)
	}
	if !hasNVIDIA || o.NvidiaSMI == "-" {
		return nil
	}
	var smi []SMIGPU
	var err error
	switch {
	case o.SMIOutput != nil:
		smi, err = ParseSMI(o.SMIOutput)
	case o.NvidiaSMI != "":
		smi, err = QuerySMI(ctx, o.NvidiaSMI, o.Timeout)
	case root == "/":
		p, lerr := exec.LookPath("nvidia-smi")
		if lerr != nil {
			return nil
		}
		smi, err = QuerySMI(ctx, p, o.Timeout)
	default:
		return nil // a recorded tree without recorded nvidia-smi output
	}
	if err != nil {
		return fmt.Errorf("devices: nvidia-smi: %w", err)
	}
	applySMI(r.GPUs, smi)
	return nil
}

// Unreached is a GPU on the bus that the llama-server asked lists no
// device for: the binary was built without a backend for it.
type Unreached struct {
	Address string    `json:"address"`
	Name    string    `json:"name"`
	Kind    Kind      `json:"kind"`
	Memory  int64     `json:"memory_mib,omitempty"` // from nvidia-smi or the driver; 0 when unknown
	Needs   []Backend `json:"needs"`                // backends that would reach it, best first
	// DevName is the -dev name a build with Needs[0] gives it (CUDA0).
	DevName string `json:"dev_name"`
}

// Device is the device a llama-server built with u.Needs[0] would list
// for u, for planning; its Total is u.Memory.
func (u Unreached) Device() Device {
	d := Device{Name: u.DevName, Description: u.Name, Backend: u.Needs[0], Total: u.Memory, Free: u.Memory, Kind: u.Kind}
	return d
}

// vendorOfDescription guesses a runtime device's vendor from its
// description ("NVIDIA H200", "AMD Radeon Graphics", "Intel(R) Arc").
func vendorOfDescription(desc string) string {
	d := strings.ToLower(desc)
	switch {
	case strings.Contains(d, "nvidia") || strings.Contains(d, "geforce") || strings.Contains(d, "quadro") ||
		strings.Contains(d, "tesla") || classifyDescription(desc) == ClassNVIDIADC:
		return "NVIDIA"
	case strings.Contains(d, "amd") || strings.Contains(d, "radeon") || strings.Contains(d, "instinct"):
		return "AMD"
	case strings.Contains(d, "intel") || strings.Contains(d, "arc") || strings.Contains(d, "iris") || strings.Contains(d, "uhd"):
		return "Intel"
	}
	return ""
}

// unreached lists the GPUs of r that no runtime device covers: a real GPU
// whose vendor none of the llama-server's (non-software) devices has.
func unreached(r *Report) []Unreached {
	covered := map[string]int{}
	for _, d := range r.Runtime {
		if d.Kind == KindSoftware {
			continue
		}
		if v := vendorOfDescription(d.Description); v != "" {
			covered[v]++
		}
	}
	next := map[Backend]int{}
	var out []Unreached
	for _, g := range r.GPUs {
		if g.Kind != KindDiscreteGPU && g.Kind != KindIntegratedGPU {
			continue
		}
		if covered[g.Vendor] > 0 {
			covered[g.Vendor]--
			continue
		}
		needs := g.Class.Backends
		if len(needs) == 0 {
			needs = []Backend{BackendVulkan}
		}
		b := needs[0]
		idx := next[b]
		if g.SMIIndex != nil && b == BackendCUDA {
			idx = *g.SMIIndex
		}
		next[b] = idx + 1
		out = append(out, Unreached{Address: g.Address, Name: g.Name, Kind: g.Kind, Memory: g.VRAM,
			Needs: append([]Backend(nil), needs...), DevName: fmt.Sprintf("%s%d", b, idx)})
	}
	return out
}

// BuildNote says what the llama-server lacks for u, for people.
func (u Unreached) BuildNote(server string) string {
	names := make([]string, len(u.Needs))
	for i, b := range u.Needs {
		names[i] = string(b)
	}
	return fmt.Sprintf("%s lists no device for the %s at %s: it has no %s backend; a llama-server built with %s would list it as %s",
		server, u.Name, u.Address, strings.Join(names, " or "), u.Needs[0], u.DevName)
}
