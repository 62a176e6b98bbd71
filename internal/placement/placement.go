// Package placement turns a GGUF model's facts and a machine's devices into
// placement advice for llama-server: which device holds the whole model, or
// how the overflow spills; which flags are inert or abort for this model;
// whether a guard model fits beside it; and the exact command line. It is
// pure: no I/O, no clock. Every rule cites the Finding it rests on.
package placement

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

// ParseKind parses cpu, igpu or dgpu, the kinds placement places on.
func ParseKind(s string) (devices.Kind, error) {
	for _, k := range []devices.Kind{devices.KindCPU, devices.KindIntegratedGPU, devices.KindDiscreteGPU} {
		if strings.EqualFold(s, k.String()) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("placement: unknown device kind %q (want cpu, igpu or dgpu)", s)
}

// Default effective decode bandwidths in bytes per second, used for the
// expected-slowdown estimates when a device does not give its own. They
// are approximations: the iGPU and CPU values are what LocalScore's 1B
// Q4_K_M decode rates imply (about 0.8 GB read per token at 11.8 vs about
// 50 t/s on Radeon 780M machines, FindingDecodeBandwidth); the dGPU value
// is near an RTX 3090/4090's nominal 936-1008 GB/s.
const (
	DefaultDGPUBandwidth = 900e9
	DefaultIGPUBandwidth = 10e9
	DefaultCPUBandwidth  = 40e9
)

// bandwidth is d's effective decode bandwidth, or the default for its kind.
func bandwidth(d devices.Device) float64 {
	if d.Bandwidth > 0 {
		return d.Bandwidth
	}
	switch d.Kind {
	case devices.KindDiscreteGPU:
		return DefaultDGPUBandwidth
	case devices.KindIntegratedGPU:
		return DefaultIGPUBandwidth
	}
	return DefaultCPUBandwidth
}

// ParseDevice parses NAME:MEMORY[:KIND[:BANDWIDTH]], e.g. CUDA0:32GiB:dgpu,
// Vulkan1:8GiB:igpu, CPU:64GiB:cpu, CUDA0:24GiB:dgpu:936GB. A missing kind
// is cpu for the name CPU and dgpu otherwise; bandwidth is bytes per second.
func ParseDevice(s string) (devices.Device, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 4 || parts[0] == "" {
		return devices.Device{}, fmt.Errorf("placement: device %q: want NAME:MEMORY[:KIND[:BANDWIDTH]]", s)
	}
	mem, err := humanize.ParseBytes(parts[1])
	if err != nil || mem == 0 {
		return devices.Device{}, fmt.Errorf("placement: device %q: memory %q: want a size like 24GiB", s, parts[1])
	}
	d := devices.Device{Name: parts[0], Memory: mem, Kind: devices.KindDiscreteGPU}
	if d.IsCPU() {
		d.Name, d.Kind = "CPU", devices.KindCPU
	}
	if len(parts) >= 3 {
		if d.Kind, err = ParseKind(parts[2]); err != nil {
			return devices.Device{}, err
		}
	}
	if len(parts) == 4 {
		bw, err := humanize.ParseBytes(parts[3])
		if err != nil || bw == 0 {
			return devices.Device{}, fmt.Errorf("placement: device %q: bandwidth %q: want bytes per second like 936GB", s, parts[3])
		}
		d.Bandwidth = float64(bw)
	}
	return d, nil
}

// Model is what placement needs to know about a model (see gguf.Model).
type Model struct {
	Path             string
	Architecture     string
	Layers           uint64   // block_count, including NextN blocks
	HeadDimK         uint64   // n_embd_head_k
	NextNLayers      uint32   // embedded MTP blocks
	Experts          uint32   // 0 for dense
	ExpertsUsed      uint32   // experts active per token
	WeightsBytes     uint64   // all tensor data
	LayerBytes       []uint64 // per block
	LayerExpertBytes []uint64 // per block, MoE expert tensors only
	OutputBytes      uint64   // output head (offloaded with -ngl > layers)
	ContextLength    uint64   // trained context
	MTPSibling       string   // path of a separate mtp-*.gguf, if any
	MTPSiblingBytes  uint64
}

// Guard is a guard model to place beside the main model.
type Guard struct {
	Name  string `json:"name"`
	Bytes uint64 `json:"bytes"` // weights + KV cache + compute at its context
}

// Request is one placement question.
type Request struct {
	Model    Model
	Devices  []devices.Device
	Ctx      uint64 // per slot
	Parallel uint64
	KVType   string // f16, q8_0, q4_0: the cache the plan and its command use
	// AskedKVType is the cache type asked for when llama-server refuses it
	// for this model (see KVTypeRefused) and KVType is the f16 used
	// instead; empty otherwise.
	AskedKVType  string
	KVBytes      uint64 // KV cache for Ctx x Parallel cells
	ComputeBytes uint64 // compute buffer estimate
	Guard        *Guard
	Server       string // llama-server binary name or path; "" = llama-server
}

// Severity ranks a recommendation.
type Severity int

// Severities.
const (
	Info Severity = iota
	Warning
	Error
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return "Severity(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText makes Severity a JSON string.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Recommendation is one piece of advice.
type Recommendation struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Text     string   `json:"text"`
	Finding  Finding  `json:"finding"`
	Flags    []string `json:"flags,omitempty"` // the llama-server flags it concerns
}

// Strategy is how the main model is placed.
type Strategy int

// Strategies.
const (
	Whole       Strategy = iota // all layers on one device
	SpillLayers                 // -ngl N: the first layers stay on the CPU
	SpillExpert                 // --n-cpu-moe N: the experts of the first N layers stay on the CPU
	CPUOnly                     // -dev none
	NoFit                       // does not fit in the memory given
)

func (s Strategy) String() string {
	switch s {
	case Whole:
		return "whole"
	case SpillLayers:
		return "spill-layers-to-cpu"
	case SpillExpert:
		return "spill-experts-to-cpu"
	case CPUOnly:
		return "cpu-only"
	case NoFit:
		return "does-not-fit"
	}
	return "Strategy(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText makes Strategy a JSON string.
func (s Strategy) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Plan is the advice for one Request.
type Plan struct {
	Strategy        Strategy         `json:"strategy"`
	Device          string           `json:"device"`                   // main device
	NeedBytes       uint64           `json:"need_bytes"`               // weights + KV + compute
	MarginBytes     uint64           `json:"margin_bytes"`             // kept free on the device
	GPULayers       uint64           `json:"gpu_layers,omitempty"`     // -ngl
	CPUMoELayers    uint64           `json:"cpu_moe_layers,omitempty"` // --n-cpu-moe
	GPUBytes        uint64           `json:"gpu_bytes,omitempty"`      // on the main device
	CPUBytes        uint64           `json:"cpu_bytes,omitempty"`      // spilled to host memory
	Slowdown        float64          `json:"expected_slowdown,omitempty"`
	IGPUSlowdown    float64          `json:"igpu_split_slowdown,omitempty"` // the same overflow on the iGPU instead
	IGPU            string           `json:"igpu,omitempty"`
	GuardDevice     string           `json:"guard_device,omitempty"`
	GuardFits       bool             `json:"guard_fits"`
	Command         []string         `json:"command"`
	CommandLine     string           `json:"command_line"`
	Recommendations []Recommendation `json:"recommendations"`
}
