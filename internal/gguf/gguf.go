// Package gguf reads the facts Aegis needs from a GGUF model header:
// architecture, size, layer shapes, MTP packaging and llama.cpp's KV-cache
// size. It is a thin adapter around github.com/gpustack/gguf-parser-go (a
// maintained parser that also models llama.cpp's memory use), with header
// limits checked before the parser sees the file.
package gguf

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	gp "github.com/gpustack/gguf-parser-go"
)

// KVType is a llama.cpp KV-cache element type (-ctk / -ctv).
type KVType int

// KV-cache types `aegis plan` supports.
const (
	KVF16 KVType = iota
	KVQ8_0
	KVQ4_0
)

func (t KVType) String() string {
	switch t {
	case KVF16:
		return "f16"
	case KVQ8_0:
		return "q8_0"
	case KVQ4_0:
		return "q4_0"
	}
	return "KVType(" + strconv.Itoa(int(t)) + ")"
}

// ParseKVType parses f16, q8_0 or q4_0.
func ParseKVType(s string) (KVType, error) {
	for _, t := range []KVType{KVF16, KVQ8_0, KVQ4_0} {
		if strings.EqualFold(s, t.String()) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("gguf: unknown KV cache type %q (want f16, q8_0 or q4_0)", s)
}

func (t KVType) ggml() gp.GGMLType {
	switch t {
	case KVQ8_0:
		return gp.GGMLTypeQ8_0
	case KVQ4_0:
		return gp.GGMLTypeQ4_0
	}
	return gp.GGMLTypeF16
}

// Model is what Aegis knows about one GGUF file.
type Model struct {
	Path     string `json:"path"`
	Name     string `json:"name,omitempty"`
	Basename string `json:"basename,omitempty"` // general.basename
	// ChatTemplate is tokenizer.chat_template, the Jinja template
	// llama-server applies to chat requests.
	ChatTemplate  string `json:"-"`
	Architecture  string `json:"architecture"`
	Parameters    uint64 `json:"parameters"`
	FileType      string `json:"file_type"` // quantization, e.g. Q4_K_M
	Layers        uint64 `json:"layers"`    // block_count, including NextN/MTP blocks
	Heads         uint64 `json:"heads"`
	HeadsKV       uint64 `json:"heads_kv"`
	Embedding     uint64 `json:"embedding_length"`
	HeadDimK      uint64 `json:"head_dim_k"` // key_length (n_embd_head_k)
	HeadDimV      uint64 `json:"head_dim_v"`
	Vocab         uint64 `json:"vocab_size"`
	ContextLength uint64 `json:"context_length"`
	Experts       uint32 `json:"expert_count,omitempty"`
	ExpertsUsed   uint32 `json:"expert_used_count,omitempty"`
	NextNLayers   uint32 `json:"nextn_predict_layers,omitempty"` // embedded MTP blocks
	FileBytes     uint64 `json:"file_bytes"`
	WeightsBytes  uint64 `json:"weights_bytes"` // tensor data

	// Per-layer weight bytes, from the tensor infos.
	LayerBytes       []uint64 `json:"-"` // blk.N.* (all tensors)
	LayerExpertBytes []uint64 `json:"-"` // blk.N.*_exps.* (MoE experts)
	OutputBytes      uint64   `json:"-"` // output.weight + output_norm
	InputBytes       uint64   `json:"-"` // token_embd (stays in host memory in llama.cpp)

	file *gp.GGUFFile
}

// Open parses the GGUF header at path, refusing headers past lim (the zero
// Limits means DefaultLimits).
func Open(path string, lim Limits) (*Model, error) {
	lim = lim.withDefaults()
	if err := checkHeader(path, lim); err != nil {
		return nil, err
	}
	f, err := gp.ParseGGUFFile(path, gp.SkipLargeMetadata())
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	a, md := f.Architecture(), f.Metadata()
	m := &Model{
		Path:          path,
		Name:          md.Name,
		Architecture:  a.Architecture,
		Parameters:    uint64(md.Parameters),
		FileType:      md.FileTypeDescriptor,
		Layers:        a.BlockCount,
		Heads:         a.AttentionHeadCount,
		HeadsKV:       a.AttentionHeadCountKV,
		Embedding:     a.EmbeddingLength,
		HeadDimK:      uint64(a.AttentionKeyLength),
		HeadDimV:      uint64(a.AttentionValueLength),
		Vocab:         a.VocabularyLength,
		ContextLength: a.MaximumContextLength,
		Experts:       a.ExpertCount,
		ExpertsUsed:   a.ExpertUsedCount,
		NextNLayers:   a.NextNPredictLayers,
		FileBytes:     uint64(md.FileSize),
		WeightsBytes:  uint64(md.Size),
		file:          f,
	}
	if kv, ok := f.Header.MetadataKV.Get("general.basename"); ok && kv.ValueType == gp.GGUFMetadataValueTypeString {
		m.Basename = kv.ValueString()
	}
	if kv, ok := f.Header.MetadataKV.Get("tokenizer.chat_template"); ok && kv.ValueType == gp.GGUFMetadataValueTypeString {
		m.ChatTemplate = kv.ValueString()
	}
	if m.HeadsKV == 0 {
		m.HeadsKV = m.Heads
	}
	if m.Vocab == 0 {
		m.Vocab = f.Tokenizer().TokensLength
	}
	if m.Layers > uint64(len(f.TensorInfos)) { // a block count no tensor backs is a corrupt header
		return nil, fmt.Errorf("gguf: %s: block_count %d exceeds the %d tensors", path, m.Layers, len(f.TensorInfos))
	}
	m.LayerBytes = make([]uint64, m.Layers)
	m.LayerExpertBytes = make([]uint64, m.Layers)
	for _, ti := range f.TensorInfos {
		n := ti.Bytes()
		switch {
		case strings.HasPrefix(ti.Name, "blk."):
			rest := ti.Name[len("blk."):]
			idx, _, _ := strings.Cut(rest, ".")
			i, err := strconv.ParseUint(idx, 10, 64)
			if err != nil || i >= m.Layers {
				continue
			}
			m.LayerBytes[i] += n
			if strings.Contains(rest, "_exps.") {
				m.LayerExpertBytes[i] += n
			}
		case strings.HasPrefix(ti.Name, "output"):
			m.OutputBytes += n
		case strings.HasPrefix(ti.Name, "token_embd"):
			m.InputBytes += n
		}
	}
	return m, nil
}

// KVBytes is the KV cache llama.cpp allocates for ctxTokens cells of type
// t, from gguf-parser-go's llama.cpp estimate (which knows GQA, sliding
// windows, MLA and recurrent layers).
func (m *Model) KVBytes(ctxTokens uint64, t KVType) uint64 {
	if m.file == nil || ctxTokens == 0 {
		return 0
	}
	e := m.file.EstimateLLaMACppRun(
		gp.WithLLaMACppContextSize(int32(min(ctxTokens, 1<<31-1))),
		gp.WithLLaMACppOffloadLayers(0),
		gp.WithLLaMACppCacheKeyType(t.ggml()),
		gp.WithLLaMACppCacheValueType(t.ggml()),
		gp.WithFlashAttention(),
	)
	var total uint64
	for _, d := range e.Devices {
		total += uint64(d.KVCache.Key) + uint64(d.KVCache.Value)
	}
	return total
}

// ComputeBytes is gguf-parser-go's estimate of the compute buffer of the
// device that runs the graph with every layer offloaded to it. Against
// llama-server on the testbed (CPU): stories260K at 2048 cells 3.63 vs
// 3.65 MiB; llama-2-tiny-random 8.3 vs 4.13 MiB at 8192 cells and 1.27 vs
// 1.13 MiB at 1024 cells. An approximation that errs high; the placement
// margin absorbs it.
func (m *Model) ComputeBytes(ctxTokens uint64) uint64 {
	if m.file == nil || ctxTokens == 0 {
		return 0
	}
	e := m.file.EstimateLLaMACppRun(
		gp.WithLLaMACppContextSize(int32(min(ctxTokens, 1<<31-1))),
		gp.WithLLaMACppOffloadLayers(m.Layers+1),
		gp.WithFlashAttention(),
	)
	var c uint64
	for _, d := range e.Devices[min(1, len(e.Devices)):] {
		c = max(c, uint64(d.Computation.Compute))
	}
	if c == 0 && len(e.Devices) > 0 {
		c = uint64(e.Devices[0].Computation.Footprint)
	}
	return c
}

// MTPSibling looks for a separate MTP head next to the model: a file named
// mtp-*.gguf in the same directory. It returns the paths found, sorted.
func MTPSibling(modelPath string) ([]string, error) {
	dir := filepath.Dir(modelPath)
	matches, err := filepath.Glob(filepath.Join(dir, "mtp-*.gguf"))
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	var out []string
	for _, p := range matches {
		if filepath.Clean(p) == filepath.Clean(modelPath) {
			continue
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}
