package synth

import "fmt"

// Model describes a llama-style transformer whose GGUF header Model.File
// builds: per-layer attention and feed-forward tensors (dense or MoE
// experts), token embedding and output head, and the architecture keys
// llama.cpp reads.
type Model struct {
	Arch        string // general.architecture, e.g. llama, qwen3moe, glm4moe
	Name        string
	FileType    uint32 // general.file_type (15 = MOSTLY_Q4_K_M)
	Layers      int    // block_count, including NextN layers
	Embd        int
	Heads       int
	HeadsKV     int
	FF          int // dense feed-forward length
	Vocab       int
	Ctx         int
	Experts     int // 0 for dense
	ExpertsUsed int
	ExpertFF    int // expert_feed_forward_length
	NextN       int // <arch>.nextn_predict_layers (embedded MTP)
	WeightType  uint32
	OutputType  uint32
}

// File builds the GGUF header for m.
func (m Model) File() File {
	a := m.Arch
	hd := m.Embd / m.Heads
	kvs := []KV{
		{"general.architecture", a},
		{"general.name", m.Name},
		{"general.file_type", m.FileType},
		{a + ".context_length", m.Ctx},
		{a + ".embedding_length", m.Embd},
		{a + ".block_count", m.Layers},
		{a + ".feed_forward_length", m.FF},
		{a + ".attention.head_count", m.Heads},
		{a + ".attention.head_count_kv", m.HeadsKV},
		{a + ".attention.layer_norm_rms_epsilon", float32(1e-5)},
		{a + ".rope.dimension_count", hd},
		{a + ".vocab_size", m.Vocab},
		{"tokenizer.ggml.model", "gpt2"},
	}
	if m.Experts > 0 {
		kvs = append(kvs,
			KV{a + ".expert_count", m.Experts},
			KV{a + ".expert_used_count", m.ExpertsUsed},
			KV{a + ".expert_feed_forward_length", m.ExpertFF})
	}
	if m.NextN > 0 {
		kvs = append(kvs, KV{a + ".nextn_predict_layers", m.NextN})
	}
	e, w := uint64(m.Embd), m.WeightType
	ts := []Tensor{{"token_embd.weight", []uint64{e, uint64(m.Vocab)}, w}}
	for i := 0; i < m.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			Tensor{p + "attn_norm.weight", []uint64{e}, F32},
			Tensor{p + "attn_q.weight", []uint64{e, uint64(m.Heads * hd)}, w},
			Tensor{p + "attn_k.weight", []uint64{e, uint64(m.HeadsKV * hd)}, w},
			Tensor{p + "attn_v.weight", []uint64{e, uint64(m.HeadsKV * hd)}, w},
			Tensor{p + "attn_output.weight", []uint64{uint64(m.Heads * hd), e}, w},
			Tensor{p + "ffn_norm.weight", []uint64{e}, F32},
		)
		if m.Experts > 0 {
			x, ef := uint64(m.Experts), uint64(m.ExpertFF)
			ts = append(ts,
				Tensor{p + "ffn_gate_inp.weight", []uint64{e, x}, F32},
				Tensor{p + "ffn_gate_exps.weight", []uint64{e, ef, x}, w},
				Tensor{p + "ffn_up_exps.weight", []uint64{e, ef, x}, w},
				Tensor{p + "ffn_down_exps.weight", []uint64{ef, e, x}, w},
			)
		} else {
			f := uint64(m.FF)
			ts = append(ts,
				Tensor{p + "ffn_gate.weight", []uint64{e, f}, w},
				Tensor{p + "ffn_up.weight", []uint64{e, f}, w},
				Tensor{p + "ffn_down.weight", []uint64{f, e}, w},
			)
		}
	}
	out := m.OutputType
	if out == 0 {
		out = w
	}
	ts = append(ts,
		Tensor{"output_norm.weight", []uint64{e}, F32},
		Tensor{"output.weight", []uint64{e, uint64(m.Vocab)}, out})
	return File{KVs: kvs, Tensors: ts}
}

// Write writes m's header (with a sparse data section) to path.
func (m Model) Write(path string) (int64, error) { return m.File().Write(path) }

// Llama70B is a Llama-3-70B-shaped dense model in Q4_K (public shape: 80
// layers, 8192 embedding, 64 heads, 8 KV heads, 28672 FFN, 128256 vocab).
func Llama70B() Model {
	return Model{Arch: "llama", Name: "synthetic-llama-70b", FileType: 15, Layers: 80, Embd: 8192, Heads: 64,
		HeadsKV: 8, FF: 28672, Vocab: 128256, Ctx: 131072, WeightType: Q4_K, OutputType: Q6_K}
}

// Qwen3MoE30B is a Qwen3-30B-A3B-shaped MoE model in Q4_K (48 layers, 2048
// embedding, 32 heads, 4 KV heads, 128 experts of which 8 are used, expert
// FFN 768).
func Qwen3MoE30B() Model {
	return Model{Arch: "qwen3moe", Name: "synthetic-qwen3moe-30b-a3b", FileType: 15, Layers: 48, Embd: 2048,
		Heads: 32, HeadsKV: 4, FF: 6144, Vocab: 151936, Ctx: 40960, Experts: 128, ExpertsUsed: 8, ExpertFF: 768,
		WeightType: Q4_K, OutputType: Q6_K}
}

// GLM4MoEMTP is a GLM-4.5-Air-like MoE model with one embedded NextN/MTP
// layer (47 layers including the MTP block, 4096 embedding, 128 experts, 8
// used, expert FFN 1536). The heads are simplified to 32 x 128 (the real
// model has 96 query heads of 128 over a 4096 embedding).
func GLM4MoEMTP() Model {
	return Model{Arch: "glm4moe", Name: "synthetic-glm4.5-air", FileType: 15, Layers: 47, Embd: 4096,
		Heads: 32, HeadsKV: 8, FF: 10752, Vocab: 151552, Ctx: 131072, Experts: 128, ExpertsUsed: 8,
		ExpertFF: 1536, NextN: 1, WeightType: Q4_K, OutputType: Q6_K}
}

// Dense8B is a Llama-3-8B-shaped dense model in Q4_K, the target of the
// separate-MTP pair.
func Dense8B() Model {
	return Model{Arch: "llama", Name: "synthetic-llama-8b", FileType: 15, Layers: 32, Embd: 4096, Heads: 32,
		HeadsKV: 8, FF: 14336, Vocab: 128256, Ctx: 131072, WeightType: Q4_K, OutputType: Q6_K}
}

// MTPHead is a separate one-block MTP head for Dense8B, written as
// mtp-<name>.gguf beside the target.
func MTPHead() Model {
	m := Dense8B()
	m.Name = "synthetic-llama-8b-mtp"
	m.Layers = 1
	m.NextN = 1
	return m
}

// Mixtral8x7B is a Mixtral-8x7B-shaped MoE model in Q4_K (32 layers, 4096
// embedding, 32 heads, 8 KV heads, 8 experts of which 2 are used, expert
// FFN 14336, 32000 vocab): about 26 GB, more than a 24 GB card holds.
func Mixtral8x7B() Model {
	return Model{Arch: "llama", Name: "synthetic-mixtral-8x7b", FileType: 15, Layers: 32, Embd: 4096, Heads: 32,
		HeadsKV: 8, FF: 14336, Vocab: 32000, Ctx: 32768, Experts: 8, ExpertsUsed: 2, ExpertFF: 14336,
		WeightType: Q4_K, OutputType: Q6_K}
}
