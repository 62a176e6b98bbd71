// Package catalog lists the small guard models Aegis knows how to place:
// their size, architecture facts, recommended quantization and file size,
// and the memory they need at a given context, so `aegis plan` can say
// which guard fits in a memory budget.
//
// Numbers come from the public model cards and config.json files on
// Hugging Face (named per entry) and from the sizes of the public Q4_K_M
// GGUF conversions. File sizes and parameter counts are rounded and
// approximate; the memory estimate adds llama.cpp's KV cache (exact for
// the given shape) and an approximate compute buffer.
package catalog

import (
	"fmt"
	"sort"
	"strings"
)

// Runtime says how a guard runs.
type Runtime int

// Runtimes.
const (
	LlamaServer Runtime = iota // a generative GGUF under llama-server
	Classifier                 // a sequence classifier (not GGUF-generative)
)

func (r Runtime) String() string {
	if r == Classifier {
		return "classifier"
	}
	return "llama-server"
}

// MarshalText makes Runtime a JSON string.
func (r Runtime) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Entry is one guard model.
type Entry struct {
	ID           string  `json:"id"`
	Name         string  `json:"name"`
	Source       string  `json:"source"` // where the numbers come from
	Params       float64 `json:"parameters"`
	Architecture string  `json:"architecture"`
	Layers       int     `json:"layers"`
	Heads        int     `json:"heads"`
	HeadsKV      int     `json:"heads_kv"`
	HeadDim      int     `json:"head_dim"`
	Vocab        int     `json:"vocab_size"`
	Ctx          int     `json:"context_length"`
	Quant        string  `json:"recommended_quant"`
	FileBytes    uint64  `json:"file_bytes"`
	Runtime      Runtime `json:"runtime"`
	// Protocol is the guard_llm protocol the model was trained on
	// (llama-guard, qwen3guard, granite-guardian, shieldgemma); empty for
	// general instruct models, which are asked with verdict-json.
	Protocol string `json:"protocol,omitempty"`
	Note     string `json:"note,omitempty"`
}

const (
	mb = 1000 * 1000
	gb = 1000 * mb
)

// Entries is the catalogue, smallest file first.
var Entries = sortBySize([]Entry{
	{
		ID: "phi-3-mini", Name: "Phi-3-mini-4k-instruct",
		// microsoft/Phi-3-mini-4k-instruct model card and config.json (3.8B;
		// hidden 3072, 32 layers, 32 heads, no GQA, vocab 32064, 4k context);
		// the official Phi-3-mini-4k-instruct-q4.gguf is about 2.2 GB.
		Source: "microsoft/Phi-3-mini-4k-instruct (model card, config.json)",
		Params: 3.8e9, Architecture: "phi3", Layers: 32, Heads: 32, HeadsKV: 32, HeadDim: 96, Vocab: 32064, Ctx: 4096,
		Quant: "Q4_K_M", FileBytes: 2390 * mb, Runtime: LlamaServer,
	},
	{
		ID: "qwen2-1.5b", Name: "Qwen2-1.5B-Instruct",
		// Qwen/Qwen2-1.5B-Instruct config.json: hidden 1536, 28 layers, 12
		// heads, 2 KV heads, vocab 151936, 32k context; Q4_K_M GGUF about 0.99 GB.
		Source: "Qwen/Qwen2-1.5B-Instruct (config.json, Qwen2-1.5B-Instruct-GGUF)",
		Params: 1.54e9, Architecture: "qwen2", Layers: 28, Heads: 12, HeadsKV: 2, HeadDim: 128, Vocab: 151936, Ctx: 32768,
		Quant: "Q4_K_M", FileBytes: 986 * mb, Runtime: LlamaServer,
	},
	{
		ID: "qwen1.5-1.8b", Name: "Qwen1.5-1.8B-Chat",
		// Qwen/Qwen1.5-1.8B-Chat config.json: hidden 2048, 24 layers, 16
		// heads, no GQA, vocab 151936, 32k context; Q4_K_M about 1.2 GB (approx.).
		Source: "Qwen/Qwen1.5-1.8B-Chat (config.json; GGUF size approximate)",
		Params: 1.84e9, Architecture: "qwen2", Layers: 24, Heads: 16, HeadsKV: 16, HeadDim: 128, Vocab: 151936, Ctx: 32768,
		Quant: "Q4_K_M", FileBytes: 1220 * mb, Runtime: LlamaServer,
	},
	{
		ID: "qwen2.5-1.5b", Name: "Qwen2.5-1.5B-Instruct",
		// Qwen/Qwen2.5-1.5B-Instruct config.json: same shape as Qwen2-1.5B
		// (28 layers, 12 heads, 2 KV heads); Q4_K_M GGUF about 1.1 GB.
		Source: "Qwen/Qwen2.5-1.5B-Instruct (config.json, Qwen2.5-1.5B-Instruct-GGUF)",
		Params: 1.54e9, Architecture: "qwen2", Layers: 28, Heads: 12, HeadsKV: 2, HeadDim: 128, Vocab: 151936, Ctx: 32768,
		Quant: "Q4_K_M", FileBytes: 1120 * mb, Runtime: LlamaServer,
	},
	{
		ID: "gemma-2-2b", Name: "gemma-2-2b-it",
		// google/gemma-2-2b-it config.json: hidden 2304, 26 layers, 8 heads,
		// 4 KV heads, head dim 256, vocab 256000, 8k context (sliding window
		// 4096 on every other layer); Q4_K_M about 1.7 GB.
		Source: "google/gemma-2-2b-it (config.json; GGUF size approximate)",
		Params: 2.61e9, Architecture: "gemma2", Layers: 26, Heads: 8, HeadsKV: 4, HeadDim: 256, Vocab: 256000, Ctx: 8192,
		Quant: "Q4_K_M", FileBytes: 1710 * mb, Runtime: LlamaServer,
	},
	{
		ID: "llama-guard-3-1b", Name: "Llama-Guard-3-1B",
		// meta-llama/Llama-Guard-3-1B model card (built on Llama-3.2-1B:
		// hidden 2048, 16 layers, 32 heads, 8 KV heads, vocab 128256, 128k
		// context); about 1.5B parameters with the untied output head, Q4_K_M
		// about 0.9 GB (approximate).
		Source: "meta-llama/Llama-Guard-3-1B (model card, config.json; GGUF size approximate)",
		Params: 1.5e9, Architecture: "llama", Layers: 16, Heads: 32, HeadsKV: 8, HeadDim: 64, Vocab: 128256, Ctx: 131072,
		Quant: "Q4_K_M", FileBytes: 900 * mb, Runtime: LlamaServer, Protocol: "llama-guard",
	},
	{
		ID: "qwen3guard-gen-0.6b", Name: "Qwen3Guard-Gen-0.6B",
		// Qwen/Qwen3Guard-Gen-0.6B model card (the generative Qwen3Guard,
		// built on Qwen3-0.6B: 0.6B parameters, about 0.75B with the
		// embeddings; config.json: hidden 1024, 28 layers, 16 heads, 8 KV
		// heads, head dim 128, vocab 151936, 32k context). The Qwen3-0.6B
		// F16 GGUF is about 1.5 GB, so Q4_K_M is about 0.48 GB (approximate).
		Source: "Qwen/Qwen3Guard-Gen-0.6B (model card, config.json; GGUF size approximate)",
		Params: 0.75e9, Architecture: "qwen3", Layers: 28, Heads: 16, HeadsKV: 8, HeadDim: 128, Vocab: 151936, Ctx: 32768,
		Quant: "Q4_K_M", FileBytes: 484 * mb, Runtime: LlamaServer, Protocol: "qwen3guard",
		Note: "three-level answer (Safe / Controversial / Unsafe) with categories; the Stream variant has classifier heads llama.cpp does not run",
	},
	{
		ID: "granite-guardian-3.0-2b", Name: "granite-guardian-3.0-2b",
		// ibm-granite/granite-guardian-3.0-2b model card (built on
		// granite-3.0-2b-instruct; config.json: hidden 2048, 40 layers, 32
		// heads, 8 KV heads, head dim 64, vocab 49155, 4k context); the
		// public Q4_K_M GGUF conversions are 1.55 GB.
		Source: "ibm-granite/granite-guardian-3.0-2b (model card, config.json; granite-guardian-3.0-2b-GGUF Q4_K_M)",
		Params: 2.5e9, Architecture: "granite", Layers: 40, Heads: 32, HeadsKV: 8, HeadDim: 64, Vocab: 49155, Ctx: 4096,
		Quant: "Q4_K_M", FileBytes: 1550 * mb, Runtime: LlamaServer, Protocol: "granite-guardian",
		Note: "answers Yes / No for one named risk (harm, jailbreak, ...) per call",
	},
	{
		ID: "shieldgemma-2b", Name: "shieldgemma-2b",
		// google/shieldgemma-2b model card (built on Gemma 2 2B; config.json
		// as gemma-2-2b: hidden 2304, 26 layers, 8 heads, 4 KV heads, head
		// dim 256, vocab 256000, 8k context); Q4_K_M about 1.7 GB like
		// gemma-2-2b (approximate).
		Source: "google/shieldgemma-2b (model card, config.json; GGUF size approximate)",
		Params: 2.61e9, Architecture: "gemma2", Layers: 26, Heads: 8, HeadsKV: 4, HeadDim: 256, Vocab: 256000, Ctx: 8192,
		Quant: "Q4_K_M", FileBytes: 1710 * mb, Runtime: LlamaServer, Protocol: "shieldgemma",
		Note: "answers Yes / No against one written policy (dangerous, harassment, hate, sexual) per call",
	},
	{
		ID: "prompt-guard-2-86m", Name: "Llama-Prompt-Guard-2-86M",
		// meta-llama/Llama-Prompt-Guard-2-86M model card: an mDeBERTa-v3-base
		// classifier (86M backbone parameters, 12 layers, 12 heads, hidden
		// 768, 512-token window, 250k vocabulary). The fp32 weights with the
		// embedding matrix are about 1.1 GB (approximate).
		Source: "meta-llama/Llama-Prompt-Guard-2-86M (model card)",
		Params: 86e6, Architecture: "deberta-v2", Layers: 12, Heads: 12, HeadsKV: 12, HeadDim: 64, Vocab: 251000, Ctx: 512,
		Quant: "fp32 (or int8 ONNX)", FileBytes: 1120 * mb, Runtime: Classifier,
		Note: "a sequence classifier, not a generative GGUF: run it in-process or as a sidecar with ONNX Runtime or " +
			"transformers on the CPU, scoring each user/tool message in 512-token windows (benign vs. malicious); no KV cache",
	},
	{
		ID: "prompt-guard-2-22m", Name: "Llama-Prompt-Guard-2-22M",
		// meta-llama/Llama-Prompt-Guard-2-22M model card: a DeBERTa-xsmall
		// classifier (22M backbone parameters, 6 layers, hidden 384, 512-token
		// window); about 0.3 GB of fp32 weights with the embeddings (approximate).
		Source: "meta-llama/Llama-Prompt-Guard-2-22M (model card)",
		Params: 22e6, Architecture: "deberta-v2", Layers: 6, Heads: 6, HeadsKV: 6, HeadDim: 64, Vocab: 128100, Ctx: 512,
		Quant: "fp32 (or int8 ONNX)", FileBytes: 280 * mb, Runtime: Classifier,
		Note: "a sequence classifier like the 86M model, about 3x cheaper; same runtime (ONNX Runtime or transformers on the CPU)",
	},
})

func sortBySize(es []Entry) []Entry {
	sort.SliceStable(es, func(i, j int) bool { return es[i].FileBytes < es[j].FileBytes })
	return es
}

// Lookup finds an entry by ID or name, case-insensitively.
func Lookup(s string) (Entry, error) {
	for _, e := range Entries {
		if strings.EqualFold(s, e.ID) || strings.EqualFold(s, e.Name) {
			return e, nil
		}
	}
	ids := make([]string, len(Entries))
	for i, e := range Entries {
		ids[i] = e.ID
	}
	return Entry{}, fmt.Errorf("catalog: unknown guard model %q (known: %s)", s, strings.Join(ids, ", "))
}

// KVBytes is the KV cache for ctx tokens at bytesPerElem (2 for f16):
// K and V, per layer, per KV head, per head dimension. A classifier keeps
// no KV cache.
func (e Entry) KVBytes(ctx int, bytesPerElem float64) uint64 {
	if e.Runtime == Classifier || ctx <= 0 {
		return 0
	}
	return uint64(2 * float64(e.Layers*e.HeadsKV*e.HeadDim*ctx) * bytesPerElem)
}

// ComputeBytes approximates llama.cpp's compute buffer: the logits of one
// 512-token micro-batch in f32 dominate for these vocabularies, plus 64 MiB
// for the graph. For a classifier: activations of one 512-token window.
func (e Entry) ComputeBytes() uint64 {
	if e.Runtime == Classifier {
		return 64 << 20
	}
	return uint64(512*e.Vocab*4) + 64<<20
}

// MemoryAt is the memory the guard needs at ctx tokens with an f16 KV
// cache: file + KV cache + compute buffer.
func (e Entry) MemoryAt(ctx int) uint64 {
	if e.Runtime == Classifier {
		ctx = min(ctx, e.Ctx)
	}
	return e.FileBytes + e.KVBytes(ctx, 2) + e.ComputeBytes()
}

// Fit is one entry's memory against a budget.
type Fit struct {
	Entry
	Ctx         int    `json:"ctx"`
	MemoryBytes uint64 `json:"memory_bytes"`
	Fits        bool   `json:"fits"`
}

// Fits lists every entry with its memory at ctx and whether it fits in
// budget bytes.
func Fits(budget uint64, ctx int) []Fit {
	out := make([]Fit, 0, len(Entries))
	for _, e := range Entries {
		c := min(ctx, e.Ctx)
		m := e.MemoryAt(c)
		out = append(out, Fit{Entry: e, Ctx: c, MemoryBytes: m, Fits: m <= budget})
	}
	return out
}
