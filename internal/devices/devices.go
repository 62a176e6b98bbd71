// Package devices discovers the compute devices of this machine (the CPU,
// integrated and discrete GPUs from sysfs, and the devices a llama-server
// binary sees) and classifies each against the hardware table: what to
// expect from it as the home of a small guard model, and which llama.cpp
// backends apply. Classification never decides placement on its own; it
// tells aegis bench sentinel what to measure.
//
// Device is the one device type of Aegis: discovery fills it, placement
// plans on it, and the guard supervisor, the benchmarks and the sweep pin
// llama-server to it.
//
// Discovery reads files under a root directory (normally "/"), so tests run
// on recorded sysfs/proc trees under testdata/sysfs/<machine>.
package devices

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jaypipes/pcidb"
)

// Kind says what sort of device a Device is. The zero Kind is
// KindUnknown, so a Device named by hand is never taken for a CPU.
type Kind int

// Device kinds.
const (
	KindUnknown Kind = iota
	KindCPU
	KindIntegratedGPU
	KindDiscreteGPU
	KindSoftware // a software rasterizer that poses as a GPU (llvmpipe)
)

func (k Kind) String() string {
	switch k {
	case KindCPU:
		return "cpu"
	case KindIntegratedGPU:
		return "igpu"
	case KindDiscreteGPU:
		return "dgpu"
	case KindSoftware:
		return "software"
	}
	return "unknown"
}

// MarshalText encodes the kind by name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText decodes a kind name; unknown names give KindUnknown.
func (k *Kind) UnmarshalText(b []byte) error {
	*k = KindUnknown
	for c := KindCPU; c <= KindSoftware; c++ {
		if c.String() == string(b) {
			*k = c
		}
	}
	return nil
}

// CPU describes the processor.
type CPU struct {
	Model    string   `json:"model"`
	Sockets  int      `json:"sockets"`
	Cores    int      `json:"cores"`   // physical cores
	Threads  int      `json:"threads"` // logical CPUs
	Features []string `json:"features"`
	MemTotal int64    `json:"mem_total_mib"`
	MemAvail int64    `json:"mem_available_mib"`
	Class    Class    `json:"class"`
}

// GPU is a PCI display controller found in sysfs.
type GPU struct {
	Address    string `json:"address"` // PCI address, 0000:00:02.0
	VendorID   string `json:"vendor_id"`
	DeviceID   string `json:"device_id"`
	Revision   string `json:"revision,omitempty"`
	Vendor     string `json:"vendor"`
	Name       string `json:"name"`
	Driver     string `json:"driver,omitempty"`
	BootVGA    bool   `json:"boot_vga"`
	Kind       Kind   `json:"kind"`
	VRAM       int64  `json:"vram_mib,omitempty"` // dedicated memory when the driver says (amdgpu, nvidia-smi)
	Class      Class  `json:"class"`
	NameSource string `json:"name_source"` // "table", "pci.ids", "ids" or "nvidia-smi"

	// From nvidia-smi, for NVIDIA GPUs when it answers.
	SMIIndex      *int   `json:"smi_index,omitempty"`
	VRAMUsed      int64  `json:"vram_used_mib,omitempty"`
	DriverVersion string `json:"driver_version,omitempty"`
	ComputeCap    string `json:"compute_capability,omitempty"`
}

// Device is one place llama-server can run a model, and the only device
// type of Aegis: what `llama-server --list-devices` reports about it, what
// placement reasons about, and how a server is pinned to it. The name is
// the one -dev takes ("Vulkan0", "CUDA0", "SYCL0"); "CPU" or "none" is
// the CPU backend.
type Device struct {
	Name        string  `json:"name"`
	Description string  `json:"description,omitempty"`
	Backend     Backend `json:"backend"`
	Total       int64   `json:"total_mib"`
	Free        int64   `json:"free_mib"` // also the budget: a server whose estimate is larger is not started
	Kind        Kind    `json:"kind"`
	Class       Class   `json:"class,omitzero"`

	// Memory is what placement may fill, in bytes; 0 means Total.
	Memory uint64 `json:"memory_bytes,omitempty"`
	// Bandwidth is the effective decode bandwidth in bytes per second;
	// 0 means the default for the kind.
	Bandwidth float64 `json:"bandwidth_bytes_per_s,omitempty"`

	// Env is added to a server's environment on this device, e.g.
	// GGML_VK_VISIBLE_DEVICES=0 to expose a CPU-type Vulkan device.
	Env []string `json:"env,omitempty"`
	// Args are extra server arguments for this device only.
	Args []string `json:"args,omitempty"`
}

// Named returns the device called name, its backend and (for the CPU)
// its kind taken from the name.
func Named(name string) Device {
	d := Device{Name: name, Backend: BackendOf(name)}
	if d.IsCPU() {
		d.Kind = KindCPU
	}
	return d
}

// IsCPU reports whether d is the CPU backend ("none" or "CPU").
func (d Device) IsCPU() bool {
	n := strings.ToLower(d.Name)
	return n == "none" || n == "cpu"
}

// Label is the device's display name ("CPU" for the CPU backend).
func (d Device) Label() string {
	if d.IsCPU() {
		return "CPU"
	}
	return d.Name
}

// MemoryBytes is the memory placement may fill: Memory, else Total.
func (d Device) MemoryBytes() uint64 {
	if d.Memory > 0 {
		return d.Memory
	}
	return uint64(max(d.Total, 0)) << 20
}

// Report is everything Discover found.
type Report struct {
	CPU         CPU      `json:"cpu"`
	GPUs        []GPU    `json:"gpus"`
	LlamaServer string   `json:"llama_server,omitempty"`
	Runtime     []Device `json:"runtime_devices,omitempty"`
	RuntimeErr  string   `json:"runtime_error,omitempty"`
	SMIErr      string   `json:"nvidia_smi_error,omitempty"`
	// Unreached are the GPUs on the bus that the llama-server listed no
	// device for: it was built without their backend.
	Unreached []Unreached `json:"unreached_gpus,omitempty"`
}

// Options configure Discover. The zero value reads the real machine and
// does not run llama-server.
type Options struct {
	// Root is prepended to /proc and /sys paths; "" means "/".
	Root string
	// LlamaServer, when set, is run with --list-devices.
	LlamaServer string
	// Env is added to llama-server's environment (e.g.
	// GGML_VK_VISIBLE_DEVICES=0).
	Env []string
	// Timeout bounds the llama-server run; 0 means 20s.
	Timeout time.Duration
	// NoPCIIDs skips the pci.ids fallback for names.
	NoPCIIDs bool
	// NvidiaSMI is the nvidia-smi binary asked about NVIDIA GPUs when one
	// is on the bus; "" means nvidia-smi on PATH (only when Root is the
	// real machine), "-" never asks.
	NvidiaSMI string
	// SMIOutput, when set, is used instead of running nvidia-smi (its
	// recorded output for SMIArgs).
	SMIOutput []byte
}

// Discover inspects the machine. Missing files are not errors (a VM has no
// GPUs, a container may hide /sys); a failing llama-server is recorded in
// Report.RuntimeErr.
func Discover(ctx context.Context, o Options) (*Report, error) {
	root := o.Root
	if root == "" {
		root = "/"
	}
	r := &Report{}
	cpu, err := readCPU(root)
	if err != nil {
		return nil, err
	}
	r.CPU = cpu
	gpus, err := readGPUs(root, !o.NoPCIIDs)
	if err != nil {
		return nil, err
	}
	r.GPUs = gpus
	if err := discoverSMI(ctx, r, o, root); err != nil {
		r.SMIErr = err.Error()
	}
	// Phoenix/Hawk Point share one PCI id for 760M and 780M; the CPU's
	// marketing name says which.
	for i := range r.GPUs {
		if r.GPUs[i].Class.Label == ClassRadeon780M && strings.Contains(cpu.Model, "760M") {
			r.GPUs[i].Class = ClassByLabel(ClassRadeon760M)
			r.GPUs[i].Name = "AMD Radeon 760M (Phoenix/Hawk Point)"
		}
	}
	if o.LlamaServer != "" {
		r.LlamaServer = o.LlamaServer
		devs, err := ListDevices(ctx, o.LlamaServer, o.Env, o.Timeout)
		if err != nil {
			r.RuntimeErr = err.Error()
		}
		r.Runtime = devs
		Reconcile(r)
		if err == nil {
			r.Unreached = unreached(r)
		}
	}
	return r, nil
}

// Reconcile refines runtime devices whose description the table does not
// recognise ("AMD Radeon Graphics" from ROCm) with the sysfs GPU of the
// same vendor, when there is exactly one.
func Reconcile(r *Report) {
	for i := range r.Runtime {
		d := &r.Runtime[i]
		if d.Class.Label != ClassUnknown {
			continue
		}
		var vendor string
		desc := strings.ToLower(d.Description)
		switch {
		case strings.Contains(desc, "amd") || strings.Contains(desc, "radeon"):
			vendor = "AMD"
		case strings.Contains(desc, "intel"):
			vendor = "Intel"
		case strings.Contains(desc, "nvidia"):
			vendor = "NVIDIA"
		default:
			continue
		}
		var match *GPU
		n := 0
		for j := range r.GPUs {
			if r.GPUs[j].Vendor == vendor {
				match, n = &r.GPUs[j], n+1
			}
		}
		if n == 1 {
			d.Kind, d.Class = match.Kind, match.Class
			d.Class.Backends = []Backend{d.Backend}
		}
	}
}

func readCPU(root string) (CPU, error) {
	c := CPU{Class: ClassByLabel(ClassCPU)}
	b, err := os.ReadFile(filepath.Join(root, "proc", "cpuinfo"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return c, fmt.Errorf("devices: %w", err)
	}
	parseCPUInfo(b, &c)
	m, err := os.ReadFile(filepath.Join(root, "proc", "meminfo"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return c, fmt.Errorf("devices: %w", err)
	}
	c.MemTotal, c.MemAvail = parseMemInfo(m)
	return c, nil
}

// simdFlags are the /proc/cpuinfo flags (x86) and Features (arm64) that
// matter to llama.cpp's CPU kernels.
func simdFlag(f string) bool {
	switch {
	case f == "avx", f == "avx2", f == "fma", f == "f16c", f == "avx_vnni", f == "avx_vnni_int8",
		strings.HasPrefix(f, "avx512"), strings.HasPrefix(f, "amx"),
		f == "neon", f == "asimd", f == "asimddp", f == "asimdhp", f == "sve", f == "sve2", f == "i8mm", f == "bf16", f == "sme":
		return true
	}
	return false
}

// parseCPUInfo fills model, counts and SIMD features from /proc/cpuinfo.
func parseCPUInfo(b []byte, c *CPU) {
	type core struct{ phys, core string }
	cores := map[core]bool{}
	sockets := map[string]bool{}
	feats := map[string]bool{}
	var phys, coreID string
	flush := func() {
		if coreID != "" {
			cores[core{phys, coreID}] = true
		}
		phys, coreID = "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			c.Threads++
		case "model name", "Model", "cpu model":
			if c.Model == "" {
				c.Model = v
			}
		case "physical id":
			phys = v
			sockets[v] = true
		case "core id":
			coreID = v
		case "flags", "Features":
			for _, f := range strings.Fields(v) {
				if simdFlag(f) {
					feats[f] = true
				}
			}
		}
	}
	flush()
	c.Sockets = max(len(sockets), 1)
	c.Cores = len(cores)
	if c.Cores == 0 {
		c.Cores = c.Threads
	}
	c.Features = make([]string, 0, len(feats))
	for f := range feats {
		c.Features = append(c.Features, f)
	}
	sort.Strings(c.Features)
}

// parseMemInfo returns MemTotal and MemAvailable in MiB.
func parseMemInfo(b []byte) (total, avail int64) {
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "MemTotal":
			total = n / 1024
		case "MemAvailable":
			avail = n / 1024
		}
	}
	return total, avail
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func parseHex16(s string) (uint16, bool) {
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 16)
	return uint16(n), err == nil
}

// readGPUs lists PCI display controllers (class 0x03xxxx).
func readGPUs(root string, usePCIIDs bool) ([]GPU, error) {
	dir := filepath.Join(root, "sys", "bus", "pci", "devices")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("devices: %w", err)
	}
	var db *pcidb.PCIDB
	var gpus []GPU
	for _, e := range ents {
		d := filepath.Join(dir, e.Name())
		if !strings.HasPrefix(readTrim(filepath.Join(d, "class")), "0x03") {
			continue
		}
		vs, ds := readTrim(filepath.Join(d, "vendor")), readTrim(filepath.Join(d, "device"))
		vendor, ok1 := parseHex16(vs)
		device, ok2 := parseHex16(ds)
		if !ok1 || !ok2 {
			continue
		}
		g := GPU{
			Address:  e.Name(),
			VendorID: fmt.Sprintf("%04x", vendor),
			DeviceID: fmt.Sprintf("%04x", device),
			Revision: strings.TrimPrefix(readTrim(filepath.Join(d, "revision")), "0x"),
			Vendor:   vendorName(vendor),
			BootVGA:  readTrim(filepath.Join(d, "boot_vga")) == "1",
		}
		if l, err := os.Readlink(filepath.Join(d, "driver")); err == nil {
			g.Driver = filepath.Base(l)
		}
		if v, err := strconv.ParseInt(readTrim(filepath.Join(d, "mem_info_vram_total")), 10, 64); err == nil {
			g.VRAM = v >> 20
		}
		integrated := guessIntegrated(vendor, e.Name(), g.VRAM)
		if n, ok := lookupPCI(vendor, device); ok {
			g.Name, g.NameSource, integrated = n.name, "table", n.integrated
		} else {
			if usePCIIDs && db == nil {
				// pcidb parses the whole pci.ids (54 ms per parse in
				// BenchmarkPCIIDsParse on the 2-core test VM, vs 78 ns for a
				// table lookup), so only on a miss and once per Discover.
				db, _ = pcidb.New(pcidb.WithChroot(root))
				if db == nil {
					usePCIIDs = false
				}
			}
			if db != nil {
				if p, ok := db.Products[g.VendorID+g.DeviceID]; ok {
					g.Name, g.NameSource = p.Name, "pci.ids"
				}
			}
			if g.Name == "" {
				g.Name, g.NameSource = fmt.Sprintf("%s device %s", g.Vendor, g.DeviceID), "ids"
			}
		}
		g.Kind = KindDiscreteGPU
		if integrated {
			g.Kind = KindIntegratedGPU
		}
		g.Class = ClassByLabel(classifyPCI(vendor, device, integrated))
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// guessIntegrated decides iGPU vs dGPU for ids the table does not know:
// Intel graphics at 00:02.0 is part of the SoC; an AMD APU reports a small
// BIOS carve-out as VRAM (a Strix Halo carve-out can be large, but its id
// is in the table); NVIDIA GPUs are discrete.
func guessIntegrated(vendor uint16, addr string, vramMiB int64) bool {
	switch vendor {
	case VendorNVIDIA:
		return false
	case VendorIntel:
		return strings.HasSuffix(strings.SplitN(addr, ".", 2)[0], ":00:02")
	case VendorAMD:
		// Discrete Radeons sit behind a PCIe switch (bus >= 03) with
		// >= 4 GiB VRAM; APUs are on the first buses with a carve-out.
		return vramMiB > 0 && vramMiB < 4096
	}
	return false
}

func vendorName(v uint16) string {
	switch v {
	case VendorIntel:
		return "Intel"
	case VendorAMD:
		return "AMD"
	case VendorNVIDIA:
		return "NVIDIA"
	case 0x106b:
		return "Apple"
	case 0x1af4:
		return "Red Hat (virtio)"
	case 0x1234:
		return "QEMU"
	case 0x15ad:
		return "VMware"
	}
	return fmt.Sprintf("0x%04x", v)
}

// ListDevices runs `llama-server --list-devices` with a timeout and parses
// its stdout. Noise from backend initialisation goes to stderr and is only
// quoted in the error when the run fails.
func ListDevices(ctx context.Context, binary string, env []string, timeout time.Duration) ([]Device, error) {
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "--list-devices")
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 2 * time.Second
	runErr := cmd.Run()
	devs, perr := ParseListDevices(out.Bytes())
	if runErr != nil && ctx.Err() != nil {
		return devs, fmt.Errorf("devices: %s --list-devices gave no answer within %s: %w", binary, timeout, ctx.Err())
	}
	if runErr != nil {
		tail := errb.String()
		if len(tail) > 400 {
			tail = tail[len(tail)-400:]
		}
		return devs, fmt.Errorf("devices: %s --list-devices: %w: %s", binary, runErr, strings.TrimSpace(tail))
	}
	if perr != nil {
		return devs, fmt.Errorf("devices: %s --list-devices: %w", binary, perr)
	}
	return devs, nil
}

// ErrNoHeader means the output held no "Available devices:" line.
var ErrNoHeader = errors.New(`no "Available devices:" line`)

// ParseListDevices parses llama-server --list-devices output:
//
//	Available devices:
//	  Vulkan0: llvmpipe (LLVM 22.1.8, 256 bits) (24105 MiB, 23277 MiB free)
//
// Lines before the header (ggml init noise when stderr is merged) are
// ignored, "(none)" means an empty list, and a device line whose memory
// part is missing is kept with zero sizes.
func ParseListDevices(b []byte) ([]Device, error) {
	var devs []Device
	seen := false
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		if !seen {
			if strings.TrimSpace(line) == "Available devices:" {
				seen = true
			}
			continue
		}
		if !strings.HasPrefix(line, "  ") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			break // the list ended; anything later is noise
		}
		t := strings.TrimSpace(line)
		if t == "(none)" {
			continue
		}
		name, rest, ok := strings.Cut(t, ": ")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			continue
		}
		d := Device{Name: name, Description: rest, Backend: BackendOf(name)}
		if i := strings.LastIndex(rest, " ("); i >= 0 && strings.HasSuffix(rest, ")") {
			var total, free int64
			if n, _ := fmt.Sscanf(rest[i:], " (%d MiB, %d MiB free)", &total, &free); n == 2 {
				d.Description, d.Total, d.Free = rest[:i], total, free
			}
		}
		classifyRuntime(&d)
		devs = append(devs, d)
	}
	if !seen {
		return nil, ErrNoHeader
	}
	return devs, nil
}

func classifyRuntime(d *Device) {
	label := classifyDescription(d.Description)
	d.Class = ClassByLabel(label)
	switch label {
	case ClassSoftware:
		d.Kind = KindSoftware
	case ClassRTX, ClassNVIDIADC, ClassNVIDIA, ClassAMDInstinct, ClassIntelDC, ClassArcDGPU, ClassUnknownDGPU:
		d.Kind = KindDiscreteGPU
	case ClassUnknown:
		d.Kind = KindUnknown
	default:
		d.Kind = KindIntegratedGPU
	}
	if d.Class.Label == ClassApple || d.Backend == BackendMetal {
		d.Kind = KindIntegratedGPU
	}
	// The backend the binary was built with is the one that applies.
	d.Class.Backends = []Backend{d.Backend}
}
