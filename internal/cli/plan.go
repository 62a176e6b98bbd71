package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/catalog"
	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/gguf"
	"github.com/aegis-sentinel/aegis/internal/placement"
)

// planReport is the output of aegis plan (--json); the Plan's fields
// (strategy, command, recommendations) are promoted to the top level.
type planReport struct {
	Path            string   `json:"path,omitempty"`
	Name            string   `json:"name,omitempty"`
	Architecture    string   `json:"architecture,omitempty"`
	Parameters      uint64   `json:"parameters,omitempty"`
	Quantization    string   `json:"quantization,omitempty"`
	Layers          uint64   `json:"layers,omitempty"`
	Heads           uint64   `json:"heads,omitempty"`
	HeadsKV         uint64   `json:"heads_kv,omitempty"`
	EmbeddingLength uint64   `json:"embedding_length,omitempty"`
	HeadDimK        uint64   `json:"head_dim_k,omitempty"`
	VocabSize       uint64   `json:"vocab_size,omitempty"`
	ContextLength   uint64   `json:"context_length,omitempty"`
	ExpertCount     uint32   `json:"expert_count,omitempty"`
	ExpertUsedCount uint32   `json:"expert_used_count,omitempty"`
	FileBytes       uint64   `json:"file_bytes,omitempty"`
	WeightsBytes    uint64   `json:"weights_bytes,omitempty"`
	Ctx             uint64   `json:"ctx,omitempty"`
	Parallel        uint64   `json:"parallel,omitempty"`
	KVType          string   `json:"kv_type,omitempty"`
	KVBytesPerToken float64  `json:"kv_bytes_per_token,omitempty"`
	KVBytes         uint64   `json:"kv_bytes,omitempty"`
	ComputeBytes    uint64   `json:"compute_bytes,omitempty"`
	MTP             *mtpInfo `json:"mtp,omitempty"`

	Devices     planDevices `json:"devices,omitempty"`
	DeviceNotes []string    `json:"device_notes,omitempty"`
	// BuildNeeded says which llama-server build the command line needs
	// when it places the model on a GPU the discovered llama-server has
	// no backend for.
	BuildNeeded string           `json:"build_needed,omitempty"`
	Guard       *placement.Guard `json:"guard,omitempty"`
	*placement.Plan

	GuardBudget     uint64        `json:"guard_budget_bytes,omitempty"`
	GuardBudgetCtx  int           `json:"guard_budget_ctx,omitempty"`
	GuardBudgetFits []catalog.Fit `json:"guard_budget_fits,omitempty"`
}

type mtpInfo struct {
	Packaging   string   `json:"packaging"` // none, embedded, separate
	NextNLayers uint32   `json:"nextn_predict_layers,omitempty"`
	Separate    []string `json:"separate,omitempty"`
}

type planFlags struct {
	ctx, parallel uint64
	kvType        string
	jsonOut       bool
	devices       []string
	guard         string
	guardCtx      int
	guardBudget   string
	server        string
	ctxSet        bool
	discoverWith  string   // llama-server for --list-devices
	discoverEnv   []string // its extra environment
	// discover replaces devices.Discover (tests on recorded machines).
	discover func(context.Context, devices.Options) (*devices.Report, error)
}

func init() {
	register(func(stdio *IO) *cobra.Command {
		var f planFlags
		c := &cobra.Command{
			Use:   "plan [MODEL.gguf]",
			Short: "Advise where a GGUF model, its KV cache and a draft should live",
			Long: `plan reads a GGUF header and advises how to run it with llama-server on the devices given:
the device for the whole model, or how the overflow spills to the CPU; flags that are inert or
abort for this model (-devd with an embedded MTP head, a separate mtp-*.gguf on another backend,
-sm row/tensor across vendors); whether a guard model fits beside it; and the command line.

Devices are given as NAME:MEMORY[:KIND[:BANDWIDTH]], KIND one of dgpu, igpu, cpu; without
--device, plan discovers them like aegis devices (add --llama-server PATH for the -dev names):
  aegis plan model.gguf --device CUDA0:24GiB:dgpu --device Vulkan1:8GiB:igpu --device CPU:64GiB

With --guard-budget and no model, plan lists the catalogued guard models that fit the budget:
  aegis plan --guard-budget 8GiB`,
			Args: func(c *cobra.Command, args []string) error {
				if len(args) > 1 {
					return usagef("%s takes at most one model (got %d arguments)", c.CommandPath(), len(args))
				}
				if len(args) == 0 && f.guardBudget == "" {
					return usagef("%s needs MODEL.gguf (or --guard-budget SIZE)\nRun '%s --help' for usage.", c.CommandPath(), c.CommandPath())
				}
				return nil
			},
			RunE: func(c *cobra.Command, args []string) error {
				f.ctxSet = c.Flags().Changed("ctx")
				rep, err := runPlan(c.Context(), args, f)
				if err != nil {
					return err
				}
				if f.jsonOut {
					enc := json.NewEncoder(stdio.Out)
					enc.SetIndent("", "  ")
					return enc.Encode(rep)
				}
				writePlan(stdio.Out, rep)
				return nil
			},
		}
		fl := c.Flags()
		fl.Uint64Var(&f.ctx, "ctx", 4096, "context per slot, in tokens (the default is capped at the model's trained context)")
		fl.Uint64Var(&f.parallel, "parallel", 1, "slots (llama-server -np); the KV cache holds ctx x parallel cells")
		fl.StringVar(&f.kvType, "kv-type", "f16", "KV cache type: f16, q8_0 or q4_0")
		fl.BoolVar(&f.jsonOut, "json", false, "write the report as JSON")
		fl.StringArrayVar(&f.devices, "device", nil, "a device NAME:MEMORY[:KIND[:BANDWIDTH]] (repeatable), e.g. CUDA0:32GiB:dgpu")
		fl.StringVar(&f.guard, "guard", "", "guard model to place beside the main model: a catalogue id or a FILE.gguf")
		fl.IntVar(&f.guardCtx, "guard-ctx", 4096, "context of the guard model, in tokens")
		fl.StringVar(&f.guardBudget, "guard-budget", "", "list the catalogued guard models that fit in this memory, e.g. 8GiB")
		fl.StringVar(&f.server, "server", "llama-server", "llama-server binary to name in the command line")
		fl.StringVar(&f.discoverWith, "llama-server", "", "without --device: also list the devices this llama-server sees (--list-devices)")
		fl.StringArrayVar(&f.discoverEnv, "env", nil, "KEY=VALUE for the --llama-server discovery run (e.g. GGML_VK_VISIBLE_DEVICES=0); repeatable")
		return c
	})
}

func runPlan(ctx context.Context, args []string, f planFlags) (*planReport, error) {
	kvType, err := gguf.ParseKVType(f.kvType)
	if err != nil {
		return nil, usageErr(err)
	}
	if f.parallel == 0 || f.ctx == 0 {
		return nil, usagef("--ctx and --parallel must be positive")
	}
	rep := &planReport{}
	if f.guardBudget != "" {
		b, err := humanize.ParseBytes(f.guardBudget)
		if err != nil {
			return nil, usagef("--guard-budget %q: want a size like 8GiB", f.guardBudget)
		}
		rep.GuardBudget, rep.GuardBudgetCtx, rep.GuardBudgetFits = b, f.guardCtx, catalog.Fits(b, f.guardCtx)
	}
	if len(args) == 0 {
		return rep, nil
	}
	devs := make([]devices.Device, 0, len(f.devices))
	for _, s := range f.devices {
		d, err := placement.ParseDevice(s)
		if err != nil {
			return nil, usageErr(err)
		}
		devs = append(devs, d)
	}
	var discoveryNotes []string
	var unreached []devices.Unreached
	if len(devs) == 0 {
		// No devices by hand: ask the devices package (aegis devices).
		for _, e := range f.discoverEnv {
			if !strings.Contains(e, "=") {
				return nil, usagef("--env wants KEY=VALUE, got %q", e)
			}
		}
		d, notes, un, err := discoverDevices(ctx, f)
		if err != nil {
			return nil, err
		}
		unreached = un
		devs, discoveryNotes = d, append([]string{"devices discovered on this machine (aegis devices)"}, notes...)
	}
	m, err := gguf.Open(args[0], gguf.Limits{})
	if err != nil {
		return nil, usageErr(err) // a missing or unreadable model is unusable input
	}
	ctxTokens := f.ctx
	if m.ContextLength > 0 && ctxTokens > m.ContextLength && !f.ctxSet {
		ctxTokens = m.ContextLength
	}
	cells := ctxTokens * f.parallel
	asked := ""
	if placement.KVTypeRefused(kvType.String(), m.HeadDimK) {
		// Plan (and print) what llama-server accepts; the advice says why.
		asked, kvType = kvType.String(), gguf.KVF16
	}
	kv := m.KVBytes(cells, kvType)
	compute := m.ComputeBytes(cells)
	siblings, err := gguf.MTPSibling(args[0])
	if err != nil {
		return nil, err
	}
	pm := placement.Model{
		Path: m.Path, Architecture: m.Architecture, Layers: m.Layers, HeadDimK: m.HeadDimK, NextNLayers: m.NextNLayers,
		Experts: m.Experts, ExpertsUsed: m.ExpertsUsed, WeightsBytes: m.WeightsBytes,
		LayerBytes: m.LayerBytes, LayerExpertBytes: m.LayerExpertBytes, OutputBytes: m.OutputBytes,
		ContextLength: m.ContextLength,
	}
	mtp := &mtpInfo{Packaging: "none", NextNLayers: m.NextNLayers, Separate: siblings}
	switch {
	case m.NextNLayers > 0:
		mtp.Packaging = "embedded"
	case len(siblings) > 0:
		mtp.Packaging = "separate"
		pm.MTPSibling = siblings[0]
		if h, err := gguf.Open(siblings[0], gguf.Limits{}); err == nil {
			pm.MTPSiblingBytes = h.WeightsBytes
		}
	}
	req := placement.Request{Model: pm, Devices: devs, Ctx: ctxTokens, Parallel: f.parallel, KVType: kvType.String(),
		AskedKVType: asked, KVBytes: kv, ComputeBytes: compute, Server: f.server}
	if f.guard != "" {
		g, err := guardFor(f.guard, f.guardCtx)
		if err != nil {
			return nil, err
		}
		req.Guard = g
		rep.Guard = g
	}
	plan := placement.Advise(req)
	*rep = planReport{
		Path: m.Path, Name: m.Name, Architecture: m.Architecture, Parameters: m.Parameters, Quantization: m.FileType,
		Layers: m.Layers, Heads: m.Heads, HeadsKV: m.HeadsKV, EmbeddingLength: m.Embedding, HeadDimK: m.HeadDimK, VocabSize: m.Vocab,
		ContextLength: m.ContextLength, ExpertCount: m.Experts, ExpertUsedCount: m.ExpertsUsed,
		FileBytes: m.FileBytes, WeightsBytes: m.WeightsBytes, Ctx: ctxTokens, Parallel: f.parallel, KVType: kvType.String(),
		KVBytesPerToken: float64(kv) / float64(cells), KVBytes: kv, ComputeBytes: compute, MTP: mtp,
		Devices: devs, DeviceNotes: discoveryNotes, Guard: rep.Guard, Plan: &plan, BuildNeeded: buildNeeded(plan.CommandLine, unreached),
		GuardBudget: rep.GuardBudget, GuardBudgetCtx: rep.GuardBudgetCtx, GuardBudgetFits: rep.GuardBudgetFits,
	}
	return rep, nil
}

// guardFor resolves --guard: a catalogue entry, or a GGUF file whose
// memory is computed like the main model's.
func guardFor(s string, ctx int) (*placement.Guard, error) {
	if strings.HasSuffix(strings.ToLower(s), ".gguf") {
		m, err := gguf.Open(s, gguf.Limits{})
		if err != nil {
			return nil, usageErr(fmt.Errorf("guard: %w", err))
		}
		c := uint64(ctx)
		if m.ContextLength > 0 {
			c = min(c, m.ContextLength)
		}
		return &placement.Guard{Name: m.Name, Bytes: m.WeightsBytes + m.KVBytes(c, gguf.KVF16) + m.ComputeBytes(c)}, nil
	}
	e, err := catalog.Lookup(s)
	if err != nil {
		return nil, usageErr(err)
	}
	return &placement.Guard{Name: e.Name, Bytes: e.MemoryAt(min(ctx, e.Ctx))}, nil
}

func writePlan(w io.Writer, r *planReport) {
	if r.Plan != nil {
		fmt.Fprintf(w, "%s\n", r.Path)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
		row("architecture", r.Architecture)
		row("parameters", fmt.Sprintf("%s (%d)", humanize.SIWithDigits(float64(r.Parameters), 2, ""), r.Parameters))
		row("quantization", r.Quantization)
		row("layers", fmt.Sprint(r.Layers))
		row("heads / kv heads", fmt.Sprintf("%d / %d", r.Heads, r.HeadsKV))
		row("embedding length", fmt.Sprint(r.EmbeddingLength))
		row("vocabulary", fmt.Sprint(r.VocabSize))
		row("context length", fmt.Sprint(r.ContextLength))
		if r.ExpertCount > 0 {
			row("experts", fmt.Sprintf("%d (%d used per token)", r.ExpertCount, r.ExpertUsedCount))
		}
		row("weights", humanize.IBytes(r.WeightsBytes))
		row("KV cache", fmt.Sprintf("%s per token; %s for %d x %d cells (%s)", humanize.IBytes(uint64(r.KVBytesPerToken)),
			humanize.IBytes(r.KVBytes), r.Ctx, r.Parallel, r.KVType))
		row("compute buffer", "~"+humanize.IBytes(r.ComputeBytes))
		mtp := r.MTP.Packaging
		switch mtp {
		case "embedded":
			mtp += fmt.Sprintf(" (nextn_predict_layers = %d)", r.MTP.NextNLayers)
		case "separate":
			mtp += " (" + strings.Join(r.MTP.Separate, ", ") + ")"
		}
		row("MTP", mtp)
		if len(r.DeviceNotes) == 0 && len(r.Devices) > 0 {
			row("devices", "given with --device")
		}
		for _, n := range r.DeviceNotes {
			row("devices", n)
		}
		for _, d := range r.Devices {
			row("  "+d.Name, fmt.Sprintf("%s, %s", d.Kind, humanize.IBytes(d.MemoryBytes())))
		}
		row("placement", fmt.Sprintf("%s on %s, %s needed", r.Strategy, orNone(r.Device), humanize.IBytes(r.NeedBytes)))
		tw.Flush()
		fmt.Fprintln(w, "\nrecommendations:")
		for _, rec := range r.Recommendations {
			fmt.Fprintf(w, "  [%s] %s: %s\n", rec.Severity, rec.ID, rec.Text)
			fmt.Fprintf(w, "      finding: %s (%s)\n", rec.Finding.Claim, rec.Finding.Source)
		}
		if r.CommandLine != "" {
			fmt.Fprintf(w, "\ncommand:\n  %s\n", r.CommandLine)
		}
		if r.BuildNeeded != "" {
			fmt.Fprintf(w, "  (%s)\n", r.BuildNeeded)
		}
	}
	if r.GuardBudgetFits != nil {
		if r.Plan != nil {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "guard models in %s at %d tokens of context:\n", humanize.IBytes(r.GuardBudget), r.GuardBudgetCtx)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  model\tparams\tquant\tfile\tmemory\tfits\truntime\tguard_llm protocol")
		for _, g := range r.GuardBudgetFits {
			fits := "no"
			if g.Fits {
				fits = "yes"
			}
			proto := g.Protocol
			switch {
			case proto != "":
			case g.Runtime == catalog.Classifier:
				proto = "-"
			default:
				proto = "verdict-json"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Name, humanize.SIWithDigits(g.Params, 2, ""), g.Quant,
				humanize.Bytes(g.FileBytes), humanize.IBytes(g.MemoryBytes), fits, g.Runtime, proto)
		}
		tw.Flush()
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// planDevices are the devices a plan was made for; the report shows what
// placement used of each.
type planDevices []devices.Device

// MarshalJSON writes each device's name, kind, the memory placement
// filled and its bandwidth.
func (p planDevices) MarshalJSON() ([]byte, error) {
	type shown struct {
		Name      string       `json:"name"`
		Kind      devices.Kind `json:"kind"`
		Memory    uint64       `json:"memory_bytes"`
		Bandwidth float64      `json:"bandwidth_bytes_per_s,omitempty"`
	}
	out := make([]shown, len(p))
	for i, d := range p {
		out[i] = shown{d.Name, d.Kind, d.MemoryBytes(), d.Bandwidth}
	}
	return json.Marshal(out)
}

// discoverDevices turns `aegis devices` discovery into placement devices:
// the CPU with its RAM, and each device llama-server lists under the name
// -dev takes (the --llama-server given, else the one on PATH). Software
// rasterizers (llvmpipe) and unknown kinds are left out: placing a model
// there is never advice (testbed: llvmpipe decoded at 109 vs about 2,400
// tok/s on the CPU). A GPU on the bus that the llama-server has no backend
// for is planned for under the name a build with that backend gives it
// (CUDA0), when its memory is known, and said so.
func discoverDevices(ctx context.Context, f planFlags) ([]devices.Device, []string, []devices.Unreached, error) {
	server := f.discoverWith
	if server == "" {
		if p, err := exec.LookPath("llama-server"); err == nil {
			server = p
		}
	}
	discover := f.discover
	if discover == nil {
		discover = devices.Discover
	}
	r, err := discover(ctx, devices.Options{LlamaServer: server, Env: f.discoverEnv})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("plan: discovering devices: %w", err)
	}
	var out []devices.Device
	var notes []string
	if r.CPU.MemTotal > 0 {
		out = append(out, devices.Device{Name: "CPU", Backend: devices.BackendCPU, Kind: devices.KindCPU, Total: r.CPU.MemTotal})
	}
	for _, d := range r.Runtime {
		if d.Kind != devices.KindDiscreteGPU && d.Kind != devices.KindIntegratedGPU {
			notes = append(notes, fmt.Sprintf("%s (%s, %s) left out", d.Name, d.Description, d.Kind))
			continue
		}
		if d.Total <= 0 {
			notes = append(notes, fmt.Sprintf("%s reports no memory; left out", d.Name))
			continue
		}
		out = append(out, d)
	}
	if r.RuntimeErr != "" {
		notes = append(notes, "llama-server --list-devices: "+r.RuntimeErr)
	}
	if r.LlamaServer == "" {
		for _, g := range r.GPUs {
			if g.Kind == devices.KindDiscreteGPU || g.Kind == devices.KindIntegratedGPU {
				notes = append(notes, fmt.Sprintf("%s at %s seen on the PCI bus; no llama-server was asked which devices it can use (give --llama-server)", g.Name, g.Address))
			}
		}
	}
	var planned []devices.Unreached
	for _, u := range r.Unreached {
		notes = append(notes, u.BuildNote("llama-server "+r.LlamaServer))
		if u.Memory <= 0 {
			notes = append(notes, fmt.Sprintf("%s's memory is unknown; give it with --device %s:SIZE:%s to plan for it", u.Name, u.DevName, u.Kind))
			continue
		}
		notes = append(notes, fmt.Sprintf("planned for %s as %s (%d MiB), for a llama-server built with %s", u.Name, u.DevName, u.Memory, u.Needs[0]))
		out = append(out, u.Device())
		planned = append(planned, u)
	}
	return out, notes, planned, nil
}

// buildNeeded names the build the command line needs when it uses a
// device only such a build has.
func buildNeeded(cmd string, un []devices.Unreached) string {
	for _, u := range un {
		for _, f := range strings.Fields(cmd) {
			for _, name := range strings.Split(f, ",") {
				if name == u.DevName {
					return fmt.Sprintf("needs a llama-server built with %s: the one found has no %s backend and cannot see the %s", u.Needs[0], u.Needs[0], u.Name)
				}
			}
		}
	}
	return ""
}
