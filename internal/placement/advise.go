package placement

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

// Margin is kept free on every device, as llama-server's -fit does
// (FindingFitMargin).
const Margin = 1 << 30

// Advise answers r. It never fails: a model that fits nowhere gets a
// NoFit plan with an error recommendation.
func Advise(r Request) Plan {
	m := r.Model
	if r.Parallel == 0 {
		r.Parallel = 1
	}
	// A separate MTP head must sit on the model's backend (FindingMTPSeparate),
	// so its weights count towards the model's memory.
	p := Plan{MarginBytes: Margin, NeedBytes: m.WeightsBytes + m.MTPSiblingBytes + r.KVBytes + r.ComputeBytes}
	var dgpus, igpus []devices.Device
	cpu := devices.Device{Name: "CPU", Kind: devices.KindCPU} // Memory 0: unknown, assumed large enough
	for _, d := range r.Devices {
		switch d.Kind {
		case devices.KindDiscreteGPU:
			dgpus = append(dgpus, d)
		case devices.KindIntegratedGPU:
			igpus = append(igpus, d)
		case devices.KindCPU:
			cpu = d
		}
	}
	sort.SliceStable(dgpus, func(i, j int) bool { return dgpus[i].MemoryBytes() > dgpus[j].MemoryBytes() })

	if len(dgpus) > 0 {
		adviseGPU(&p, r, dgpus[0], cpu, igpus)
	}
	if len(dgpus) == 0 || p.Strategy == NoFit {
		adviseCPU(&p, r, cpu, igpus)
	}
	if cpu.MemoryBytes() == 0 {
		p.add(Recommendation{ID: "host-memory-unknown", Severity: Info, Finding: FindingFitMargin,
			Text: "No CPU device was given, so host memory is assumed to hold whatever spills; pass --device CPU:SIZE to check it."})
	}
	flagRules(&p, r, dgpus, igpus)
	placeGuard(&p, r, dgpus, igpus, cpu)
	p.Command = command(r, p)
	p.CommandLine = shellJoin(p.Command)
	return p
}

// adviseGPU places the model on the largest discrete GPU g, spilling to
// the CPU when it does not fit.
func adviseGPU(p *Plan, r Request, g, cpu devices.Device, igpus []devices.Device) {
	m := r.Model
	p.Device = g.Name
	if p.NeedBytes+Margin <= g.MemoryBytes() {
		// Whole model with a 1 GiB margin (FindingFitMargin).
		p.Strategy, p.GPULayers, p.GPUBytes = Whole, m.Layers+1, p.NeedBytes
		p.add(Recommendation{ID: "whole-model", Severity: Info, Finding: FindingFitMargin,
			Text: fmt.Sprintf("The whole model fits on %s: %s needed of %s, leaving at least the 1 GiB margin. Offload all layers.",
				g.Name, size(p.NeedBytes), size(g.MemoryBytes())),
			Flags: []string{"-dev " + g.Name, "-ngl " + strconv.FormatUint(m.Layers+1, 10)}})
		return
	}
	// Overflow goes to the CPU, never to the iGPU (FindingSpillToCPU). For
	// MoE, experts of the first layers go first: --n-cpu-moe keeps attention
	// and the dense parts on the GPU, and only the used experts are read.
	if m.Experts > 0 {
		if n, gpuBytes, ok := expertSpill(r, g); ok {
			p.Strategy, p.GPULayers, p.CPUMoELayers, p.GPUBytes = SpillExpert, m.Layers+1, n, gpuBytes
			p.CPUBytes = p.NeedBytes - gpuBytes
			p.Slowdown = slowdown(r, g, cpu, func(i uint64) (gpuPart float64) {
				if i < n {
					return 1 - expertShare(m, i)
				}
				return 1
			}, true)
		}
	}
	if p.Strategy != SpillExpert {
		n, gpuBytes := layerSpill(r, g)
		if n == 0 {
			p.Strategy = NoFit
			p.Device = ""
			return
		}
		p.Strategy, p.GPULayers, p.GPUBytes = SpillLayers, n, gpuBytes
		p.CPUBytes = p.NeedBytes - gpuBytes
		p.Slowdown = slowdown(r, g, cpu, onGPUFromEnd(m.Layers, n), false)
	}
	if cpu.MemoryBytes() > 0 && p.CPUBytes+Margin > cpu.MemoryBytes() {
		p.add(Recommendation{ID: "spill-does-not-fit", Severity: Error, Finding: FindingFitMargin,
			Text: fmt.Sprintf("The %s that overflow %s do not fit in %s of host memory either; use a smaller quantization or context.",
				size(p.CPUBytes), g.Name, size(cpu.MemoryBytes()))})
	}
	switch p.Strategy {
	case SpillExpert:
		p.add(Recommendation{ID: "spill-experts-to-cpu", Severity: Warning, Finding: FindingSpillToCPU,
			Text: fmt.Sprintf("The model needs %s but %s has %s: keep the experts of the first %d layers on the CPU "+
				"(%s spilled) and everything else on %s. Expected decode slowdown vs. all on %s: %.1fx.",
				size(p.NeedBytes), g.Name, size(g.MemoryBytes()), p.CPUMoELayers, size(p.CPUBytes), g.Name, g.Name, p.Slowdown),
			Flags: []string{"-ngl " + strconv.FormatUint(p.GPULayers, 10), "--n-cpu-moe " + strconv.FormatUint(p.CPUMoELayers, 10)}})
	case SpillLayers:
		p.add(Recommendation{ID: "spill-layers-to-cpu", Severity: Warning, Finding: FindingSpillToCPU,
			Text: fmt.Sprintf("The model needs %s but %s has %s: offload the last %d of %d layers to %s and keep the rest "+
				"(%s) on the CPU. Expected decode slowdown vs. all on %s: %.1fx.",
				size(p.NeedBytes), g.Name, size(g.MemoryBytes()), p.GPULayers, m.Layers, g.Name, size(p.CPUBytes), g.Name, p.Slowdown),
			Flags: []string{"-ngl " + strconv.FormatUint(p.GPULayers, 10)}})
	}
	// A layer split is sequential (FindingLayerSplitSequential): the same
	// overflow on the iGPU costs its share at iGPU speed.
	if len(igpus) > 0 {
		ig := igpus[0]
		n, _ := layerSpill(r, g)
		igBytes := p.NeedBytes - sumFromEnd(r, n)
		p.IGPU = ig.Name
		p.IGPUSlowdown = slowdown(r, g, ig, onGPUFromEnd(m.Layers, n), false)
		frac := float64(m.Layers-n) / float64(max(m.Layers, 1))
		fit := ""
		if igBytes+Margin > ig.MemoryBytes() {
			fit = fmt.Sprintf(" It would not even fit: %s needed on %s, %s available.", size(igBytes), ig.Name, size(ig.MemoryBytes()))
		}
		ts := fmt.Sprintf("-dev %s,%s -sm layer -ngl %d -ts %d,%d", g.Name, ig.Name, m.Layers+1, n, m.Layers-n)
		p.add(Recommendation{ID: "no-spill-to-igpu", Severity: Warning, Finding: FindingLayerSplitSequential,
			Text: fmt.Sprintf("Do not split layers onto %s (%s): the smallest split that fits puts %.0f%% of the layers "+
				"(%d of %d) there, and because the layers run in sequence the expected decode slowdown is %.1fx "+
				"instead of %.1fx with the CPU spill.%s",
				ig.Name, ts, 100*frac, m.Layers-n, m.Layers, p.IGPUSlowdown, p.Slowdown, fit),
			Flags: []string{"-sm layer", "-ts", "-dev " + g.Name + "," + ig.Name}})
	}
	// APEX: overlap pays only when transfers and compute overlap; llama.cpp's
	// spill runs the CPU share in sequence (FindingAPEX).
	p.add(Recommendation{ID: "no-overlap-expected", Severity: Info, Finding: FindingAPEX,
		Text: "The CPU share runs in sequence with the GPU share for every token, not overlapped with it; the slowdown " +
			"estimate assumes no overlap. CPU-GPU overlap schemes help only when transfers and compute really overlap: " +
			"measure such an engine's flags with aegis bench sweep before relying on them."})
}

// adviseCPU places the model on the CPU (no discrete GPU, or none big
// enough for even one layer).
func adviseCPU(p *Plan, r Request, cpu devices.Device, igpus []devices.Device) {
	p.GPULayers, p.GPUBytes, p.CPUMoELayers, p.Slowdown = 0, 0, 0, 0
	if cpu.MemoryBytes() > 0 && p.NeedBytes+Margin > cpu.MemoryBytes() {
		p.Strategy, p.Device = NoFit, ""
		p.add(Recommendation{ID: "does-not-fit", Severity: Error, Finding: FindingFitMargin,
			Text: fmt.Sprintf("The model needs %s (weights, KV cache, compute) plus the 1 GiB margin; no device given has that much "+
				"(host memory %s). Use a smaller quantization, a smaller context or a q8_0/q4_0 KV cache.",
				size(p.NeedBytes), size(cpu.MemoryBytes()))})
		return
	}
	// -dev none keeps llama-server off any visible Vulkan device (FindingDevNone).
	p.Strategy, p.Device, p.CPUBytes = CPUOnly, "CPU", p.NeedBytes
	text := fmt.Sprintf("Run on the CPU with -dev none: %s needed", size(p.NeedBytes))
	if cpu.MemoryBytes() > 0 {
		text += " of " + size(cpu.MemoryBytes())
	}
	text += ". Without -dev none llama-server may put the model on a visible Vulkan device."
	p.add(Recommendation{ID: "cpu-only", Severity: Info, Finding: FindingDevNone, Text: text, Flags: []string{"-dev none"}})
	if len(igpus) > 0 {
		// Decode follows bandwidth; iGPUs decoded slower than their host CPUs
		// in public data (FindingDecodeBandwidth), but measure (FindingMeasure).
		p.add(Recommendation{ID: "measure-igpu", Severity: Info, Finding: FindingDecodeBandwidth,
			Text: fmt.Sprintf("%s may prefill faster than the CPU but usually decodes slower; measure both with "+
				"aegis bench sweep --set 'cpu: -dev none' --set 'igpu: -dev %s -ngl 99' before moving the model.", igpus[0].Name, igpus[0].Name),
			Flags: []string{"-dev " + igpus[0].Name}})
	}
}

// flagRules adds the flags that are inert or abort for this model and box.
func flagRules(p *Plan, r Request, dgpus, igpus []devices.Device) {
	m := r.Model
	backends := map[string]bool{}
	for _, d := range append(append([]devices.Device{}, dgpus...), igpus...) {
		backends[string(devices.BackendOf(d.Name))] = true
	}
	if len(backends) > 1 {
		names := make([]string, 0, len(backends))
		for b := range backends {
			names = append(names, b)
		}
		sort.Strings(names)
		// Row and tensor split need one vendor (FindingRowSplitVendors).
		p.add(Recommendation{ID: "no-row-split-across-vendors", Severity: Warning, Finding: FindingRowSplitVendors,
			Text: fmt.Sprintf("This box mixes backends (%s): -sm row and -sm tensor do not work across them; only -sm layer does.",
				strings.Join(names, ", ")),
			Flags: []string{"-sm row", "-sm tensor"}})
	}
	if m.NextNLayers > 0 {
		// Embedded MTP runs where the target runs (FindingMTPEmbedded).
		p.add(Recommendation{ID: "devd-inert-embedded-mtp", Severity: Warning, Finding: FindingMTPEmbedded,
			Text: fmt.Sprintf("The MTP head is embedded (%s.nextn_predict_layers = %d): it runs with the model on %s; "+
				"-devd/--device-draft has no effect on it.", m.Architecture, m.NextNLayers, orCPU(p.Device)),
			Flags: []string{"-devd"}})
	}
	if m.MTPSibling != "" {
		// A separate head shares the target's KV cache (FindingMTPSeparate).
		p.add(Recommendation{ID: "mtp-head-same-backend", Severity: Error, Finding: FindingMTPSeparate,
			Text: fmt.Sprintf("The separate MTP head %s (%s) must run on the same backend as the model (%s): it shares the "+
				"model's KV cache, and placing it on another backend (for example -devd on the iGPU) aborts.",
				baseName(m.MTPSibling), size(m.MTPSiblingBytes), orCPU(p.Device)),
			Flags: []string{"-devd"}})
	}
	if len(igpus) > 0 {
		// Only an independent draft can use the iGPU (FindingDraftOnIGPU).
		ig := igpus[0].Name
		p.add(Recommendation{ID: "draft-model-on-igpu", Severity: Info, Finding: FindingDraftOnIGPU,
			Text: fmt.Sprintf("Only an independent small draft model with its own KV cache can live on %s "+
				"(-md DRAFT.gguf -devd %s -ngld 99); an MTP head cannot.", ig, ig),
			Flags: []string{"-md", "-devd " + ig, "-ngld"}})
	}
	if r.KVType != "" && r.KVType != "f16" {
		// Quantized V cache needs flash attention (FindingQuantVFlashAttn).
		p.add(Recommendation{ID: "flash-attn-for-quantized-kv", Severity: Info, Finding: FindingQuantVFlashAttn,
			Text:  fmt.Sprintf("A %s KV cache needs flash attention: pass -fa on.", r.KVType),
			Flags: []string{"-fa on"}})
	}
	switch {
	case r.AskedKVType != "":
		// The K block must divide the head dimension (FindingQuantKVBlock);
		// the plan was made for the f16 cache llama-server accepts.
		p.add(Recommendation{ID: "kv-type-head-dim", Severity: Warning, Finding: FindingQuantKVBlock,
			Text: fmt.Sprintf("llama-server refuses a %s KV cache for this model: the head dimension %d is not a "+
				"multiple of the 32-element block. This plan and its command use an f16 cache instead.", r.AskedKVType, m.HeadDimK),
			Flags: []string{"-ctk " + r.AskedKVType, "-ctv " + r.AskedKVType}})
	case KVTypeRefused(r.KVType, m.HeadDimK):
		// A caller that did not fall back: say the command will not run.
		p.add(Recommendation{ID: "kv-type-head-dim", Severity: Error, Finding: FindingQuantKVBlock,
			Text: fmt.Sprintf("llama-server will refuse a %s KV cache for this model: the head dimension %d is not a "+
				"multiple of the 32-element block. Use -ctk f16 -ctv f16.", r.KVType, m.HeadDimK),
			Flags: []string{"-ctk " + r.KVType, "-ctv " + r.KVType}})
	}
	if m.ContextLength > 0 && r.Ctx > m.ContextLength {
		p.add(Recommendation{ID: "ctx-beyond-training", Severity: Warning, Finding: FindingContextLength,
			Text:  fmt.Sprintf("--ctx %d exceeds the trained context of %d tokens.", r.Ctx, m.ContextLength),
			Flags: []string{"-c"}})
	}
	if p.Strategy == SpillLayers || p.Strategy == SpillExpert || len(igpus) > 0 {
		p.add(Recommendation{ID: "measure", Severity: Info, Finding: FindingMeasure,
			Text: "The slowdowns are bandwidth estimates; measure the candidates on this box with aegis bench sweep."})
	}
}

// placeGuard finds a device for the guard beside the main model: another
// discrete GPU, the iGPU, then the CPU; the main GPU only as a last resort
// (FindingGuardOffMainGPU).
func placeGuard(p *Plan, r Request, dgpus, igpus []devices.Device, cpu devices.Device) {
	if r.Guard == nil {
		return
	}
	g := r.Guard
	type cand struct {
		d    devices.Device
		free int64
	}
	var cands []cand
	for i, d := range dgpus {
		if i > 0 {
			cands = append(cands, cand{d, int64(d.MemoryBytes()) - Margin})
		}
	}
	cpuFree := int64(1) << 62 // unknown host memory: assume room
	if cpu.MemoryBytes() > 0 {
		cpuFree = int64(cpu.MemoryBytes()) - Margin - int64(p.CPUBytes)
	}
	for _, d := range igpus {
		// An iGPU's memory is carved from system RAM, so what the CPU spill
		// uses is gone for it too.
		cands = append(cands, cand{d, min(int64(d.MemoryBytes())-Margin, cpuFree)})
	}
	cands = append(cands, cand{cpu, cpuFree})
	for _, c := range cands {
		if c.free >= int64(g.Bytes) {
			p.GuardDevice, p.GuardFits = c.d.Name, true
			p.add(Recommendation{ID: "guard-fits", Severity: Info, Finding: FindingGuardOffMainGPU,
				Text: fmt.Sprintf("The guard %s (%s) fits beside the main model on %s (%s free after the main model and margin).",
					g.Name, size(g.Bytes), c.d.Name, size(uint64(c.free))),
				Flags: []string{"-dev " + devFlag(c.d)}})
			return
		}
	}
	if len(dgpus) > 0 && p.Strategy == Whole {
		free := int64(dgpus[0].MemoryBytes()) - int64(p.GPUBytes) - Margin
		if free >= int64(g.Bytes) {
			p.GuardDevice = dgpus[0].Name
			p.add(Recommendation{ID: "guard-on-main-gpu", Severity: Warning, Finding: FindingGuardOffMainGPU,
				Text: fmt.Sprintf("The guard %s (%s) fits only on the main GPU %s, where it competes with the main model.",
					g.Name, size(g.Bytes), dgpus[0].Name)})
			return
		}
	}
	p.add(Recommendation{ID: "guard-does-not-fit", Severity: Error, Finding: FindingGuardOffMainGPU,
		Text: fmt.Sprintf("The guard %s (%s) does not fit beside the main model on any device given.", g.Name, size(g.Bytes))})
}

func devFlag(d devices.Device) string {
	if d.Kind == devices.KindCPU {
		return "none"
	}
	return d.Name
}

func orCPU(dev string) string {
	if dev == "" {
		return "CPU"
	}
	return dev
}

// layerBytes is the memory of block i on its device: weights plus its
// share of the KV cache.
func layerBytes(r Request, i uint64) uint64 {
	kv := r.KVBytes / max(r.Model.Layers, 1)
	return r.Model.LayerBytes[i] + kv
}

// sumFromEnd is the memory of the last n blocks.
func sumFromEnd(r Request, n uint64) uint64 {
	var s uint64
	L := r.Model.Layers
	for i := L - n; i < L; i++ {
		s += layerBytes(r, i)
	}
	return s
}

// layerSpill finds the most trailing blocks that fit on g: llama.cpp
// offloads the last -ngl blocks, the output head only when -ngl exceeds the
// block count. The compute buffer stays on g.
func layerSpill(r Request, g devices.Device) (n, gpuBytes uint64) {
	L := uint64(len(r.Model.LayerBytes))
	if g.MemoryBytes() < Margin+r.ComputeBytes {
		return 0, 0
	}
	budget := g.MemoryBytes() - Margin - r.ComputeBytes
	used := uint64(0)
	for n < L {
		b := layerBytes(r, L-1-n)
		if used+b > budget {
			break
		}
		used += b
		n++
	}
	return n, used + r.ComputeBytes
}

// expertSpill finds the fewest leading layers whose experts must stay on
// the CPU for the rest to fit on g.
func expertSpill(r Request, g devices.Device) (n, gpuBytes uint64, ok bool) {
	need := r.Model.WeightsBytes + r.Model.MTPSiblingBytes + r.KVBytes + r.ComputeBytes
	for n = 0; n <= uint64(len(r.Model.LayerExpertBytes)); n++ {
		if need+Margin <= g.MemoryBytes() {
			return n, need, true
		}
		if n < uint64(len(r.Model.LayerExpertBytes)) {
			need -= r.Model.LayerExpertBytes[n]
		}
	}
	return 0, 0, false
}

// expertShare is the fraction of block i's bytes that are experts.
func expertShare(m Model, i uint64) float64 {
	if m.LayerBytes[i] == 0 {
		return 0
	}
	return float64(m.LayerExpertBytes[i]) / float64(m.LayerBytes[i])
}

func onGPUFromEnd(L, n uint64) func(uint64) float64 {
	return func(i uint64) float64 {
		if i >= L-n {
			return 1
		}
		return 0
	}
}

// slowdown estimates decode time per token with a split against all on g.
// Decoding reads each active weight once per token and the devices run in
// sequence (FindingDecodeBandwidth, FindingLayerSplitSequential), so the
// time is the sum over devices of bytes read / bandwidth. For MoE only
// expert_used/expert_count of the expert bytes are read. onG gives the
// fraction of block i's bytes on g; the output head is on g only when every
// block is (or with expert spill, where -ngl covers it).
func slowdown(r Request, g, other devices.Device, onG func(i uint64) float64, outputOnG bool) float64 {
	m := r.Model
	var tG, tO, all float64
	activeFrac := 1.0
	if m.Experts > 0 && m.ExpertsUsed > 0 {
		activeFrac = float64(m.ExpertsUsed) / float64(m.Experts)
	}
	allOn := true
	for i := range m.LayerBytes {
		b := float64(m.LayerBytes[i])
		e := float64(m.LayerExpertBytes[i])
		read := b - e + e*activeFrac
		all += read
		f := onG(uint64(i))
		if f < 1 {
			allOn = false
		}
		if m.Experts > 0 && f < 1 && outputOnG {
			// expert spill: the non-expert part stays on g
			tG += (b - e) / bandwidth(g)
			tO += e * activeFrac / bandwidth(other)
			continue
		}
		tG += f * read / bandwidth(g)
		tO += (1 - f) * read / bandwidth(other)
	}
	out := float64(m.OutputBytes)
	all += out
	if outputOnG || allOn {
		tG += out / bandwidth(g)
	} else {
		tO += out / bandwidth(other)
	}
	base := all / bandwidth(g)
	if base == 0 {
		return 1
	}
	return (tG + tO) / base
}

func (p *Plan) add(rec Recommendation) { p.Recommendations = append(p.Recommendations, rec) }

func size(b uint64) string { return humanize.IBytes(b) }

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// command builds the llama-server command line for the plan.
func command(r Request, p Plan) []string {
	if p.Strategy == NoFit {
		return nil
	}
	server := r.Server
	if server == "" {
		server = "llama-server"
	}
	c := []string{server, "-m", r.Model.Path,
		"-c", strconv.FormatUint(r.Ctx*r.Parallel, 10), "-np", strconv.FormatUint(r.Parallel, 10)}
	if r.KVType != "" && r.KVType != "f16" {
		c = append(c, "-ctk", r.KVType, "-ctv", r.KVType, "-fa", "on")
	}
	switch p.Strategy {
	case Whole, SpillLayers:
		c = append(c, "-dev", p.Device, "-ngl", strconv.FormatUint(p.GPULayers, 10))
	case SpillExpert:
		c = append(c, "-dev", p.Device, "-ngl", strconv.FormatUint(p.GPULayers, 10),
			"--n-cpu-moe", strconv.FormatUint(p.CPUMoELayers, 10))
	case CPUOnly:
		c = append(c, "-dev", "none")
	}
	return c
}

// shellJoin quotes args for a POSIX shell.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// KVTypeRefused reports whether llama-server refuses a KV cache of type
// kvType for a model whose K head dimension is headDimK: a quantized
// cache's 32-element block must divide it (FindingQuantKVBlock).
func KVTypeRefused(kvType string, headDimK uint64) bool {
	return (kvType == "q8_0" || kvType == "q4_0") && headDimK > 0 && headDimK%32 != 0
}
