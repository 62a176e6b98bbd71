package placement

// Finding is a fact a recommendation rests on: what was observed, and
// where. Rules cite these by ID in code comments and in their output.
type Finding struct {
	ID     string `json:"id"`
	Claim  string `json:"claim"`
	Source string `json:"source"`
}

// The findings the rules rest on. Each Source names where a reader can
// check the claim: llama.cpp's documentation or code, a paper, published
// measurements, or the Aegis command that measures it.
var (
	FindingLayerSplitSequential = Finding{"layer-split-sequential",
		"A layer split (-sm layer) runs the devices one after another for every token, so each device's share " +
			"costs its own time: 10% of the layers on a weak iGPU can make decoding about 10x slower.",
		"llama.cpp tools/server/README.md (--split-mode layer) and ggml/src/ggml-backend.cpp (the scheduler computes the devices' graph splits in turn)"}
	FindingRowSplitVendors = Finding{"row-split-vendors",
		"-sm row and -sm tensor split each weight matrix across devices; they do not work across vendors or backends.",
		"llama.cpp tools/server/README.md (--split-mode row) and ggml/src/ggml-cuda (the row-split buffer type belongs to one backend)"}
	FindingSpillToCPU = Finding{"spill-to-cpu",
		"When a model overflows the GPU, spill the rest to the CPU (-ngl N, or --n-cpu-moe N for MoE experts), never to the iGPU.",
		"llama.cpp tools/server/README.md (-ngl, --n-cpu-moe)"}
	FindingMTPEmbedded = Finding{"mtp-embedded-devd-inert",
		"An MTP head embedded in the target GGUF (<arch>.nextn_predict_layers > 0) runs with the target on the target's " +
			"devices; -devd/--device-draft does not move it.",
		"llama.cpp GGUF key <arch>.nextn_predict_layers and tools/server/README.md (-devd)"}
	FindingMTPSeparate = Finding{"mtp-separate-shared-kv",
		"A separate mtp-*.gguf head shares the target's KV cache; placed on another backend than the target it aborts.",
		"llama.cpp speculative decoding (common/speculative.cpp): an MTP head uses the target context's KV cache"}
	FindingDraftOnIGPU = Finding{"draft-on-igpu",
		"Only an independent small draft model, with its own KV cache (-md, -devd, -ngld), can live on the iGPU.",
		"llama.cpp tools/server/README.md (-md, -devd, -ngld)"}
	FindingAPEX = Finding{"apex-overlap",
		"APEX (arXiv 2506.03296): CPU-GPU parallel execution helps only when CPU work and transfers overlap GPU " +
			"compute; measured on T4/A10 with 7-8B models, not on iGPUs.",
		"APEX, arXiv 2506.03296v4"}
	FindingDecodeBandwidth = Finding{"decode-bandwidth",
		"Decoding reads every active weight once per token, so its speed follows memory bandwidth: a Radeon 780M iGPU " +
			"generated 11.7-11.8 t/s on Llama 3.2 1B Q4_K_M where its host CPUs generated 35-55 t/s.",
		"LocalScore published results (localscore.ai)"}
	FindingFitMargin = Finding{"fit-margin",
		"llama-server's -fit leaves 1024 MiB free per device by default.",
		"llama.cpp tools/server/README.md (--fit)"}
	FindingDevNone = Finding{"dev-none",
		"-dev none keeps everything on the CPU; with a Vulkan device visible and no -dev, llama-server placed the model " +
			"on it (llvmpipe: 109 vs about 2,400 tok/s on the CPU).",
		"llama.cpp tools/server/README.md (-dev none), measured with llama-server on Mesa's llvmpipe Vulkan device"}
	FindingQuantVFlashAttn = Finding{"quant-v-flash-attn",
		"llama.cpp allocates a quantized V cache only with flash attention enabled.",
		"llama.cpp (llama_init_from_model: V cache quantization requires flash_attn)"}
	FindingQuantKVBlock = Finding{"quant-kv-block",
		"llama.cpp refuses a quantized K cache whose block size (32 for q8_0 and q4_0) does not divide the head " +
			"dimension: \"K cache type q8_0 with block size 32 does not divide n_embd_head_k=8\" (stories260K).",
		"llama.cpp src/llama-context.cpp (the K cache block-size check), seen with llama-server build 11669"}
	FindingGuardOffMainGPU = Finding{"guard-off-main-gpu",
		"The guard model must not steal the main GPU: it runs in its own server on whichever other device fits and measures best.",
		"aegis bench sentinel (the guard's interference with the main model, measured)"}
	FindingMeasure = Finding{"measure",
		"Placement is decided by a measured CPU-baseline ratio, never by 'GPU must be faster'; aegis bench sweep measures it.",
		"aegis bench sweep (the measured ratio against the CPU)"}
	FindingContextLength = Finding{"context-length",
		"Beyond the trained context (<arch>.context_length) quality degrades unless RoPE scaling is configured.",
		"GGUF metadata"}
)
