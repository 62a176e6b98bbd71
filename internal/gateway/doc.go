// Package gateway is Aegis's HTTP server: an OpenAI-compatible (and, in
// front of Ollama, Ollama-compatible) endpoint that forwards each request
// to an upstream model server, feeds the streamed answer through the
// attempt pipeline, releases text to the client only up to the release
// point, repairs failed attempts with hidden corrective retries, and halts
// with a stable error code when it cannot.
//
// Like httputil.ReverseProxy, a Gateway is a struct whose fields are
// hooks and settings with working nil defaults: only Upstreams is needed.
//
// # Routes
//
//	POST /v1/chat/completions, /chat/completions   streaming (SSE) and not; tools, response_format
//	POST /v1/completions, /completions             streaming (SSE) and not
//	POST /api/chat, /api/generate                  Ollama's NDJSON API, when the upstream is Ollama
//	POST /v1/messages                              Anthropic's Messages API (named SSE events and not)
//	POST /v1/messages/count_tokens                 passed to the upstream (nothing is generated)
//	POST /v1/responses                             OpenAI's Responses API (named SSE events and not)
//	POST /v1/embeddings, /embeddings               the input checks, then the upstream's embeddings
//	GET  /v1/models, /models                       the configured models, else each upstream's list
//	GET  /v1/models/{id}                           one of them
//	GET  /health, /v1/health                       Aegis and each upstream (200 when any upstream is up)
//	GET, HEAD /                                    a heartbeat, answered like the upstream kind ("Ollama is running")
//	/v1/*                                          other OpenAI endpoints: refused as not served
//	/api/*                                         other Ollama endpoints, passed through unchecked
//
// Each generating route has its dialect (dialect_chat.go,
// dialect_completions.go, dialect_ollama_chat.go,
// dialect_ollama_generate.go, dialect_messages.go, dialect_responses.go,
// sharing dialect_sse.go, dialect_ndjson.go or eventwire.go for their
// framing): it reads the request, edits it for a retry, reads
// the upstream's chunks and spells the chunks, bodies and errors the
// gateway writes itself. The rest of the gateway never asks which API it
// serves.
//
// Request members Aegis does not interpret are passed to the upstream byte
// for byte (llama-server's cache_prompt, id_slot, n_probs, grammar,
// json_schema, ...), and upstream chunks that are released whole are
// forwarded byte for byte (timings, usage, system_fingerprint).
//
// # How an answer is read
//
// The upstream is always asked to stream, whatever the client asked:
// checks run as the text arrives, and a non-streaming client gets a body
// assembled from the stream (content, tool_calls, finish_reason and the
// closing chunks' usage and timings), keeping every other member the
// upstream streamed (logprobs, reasoning_content, ...; see rebuild.go).
// A request for n > 1 choices is sent upstream as n requests of one
// choice, each checked on its own; a streaming one gets the choices one
// after another on one stream (choices.go, choices_stream.go). The stream is read to its real end,
// past finish_reason, so usage and timings are kept. Chunks go to the
// client as the attempt's release point passes them; a chunk cut by the
// release point is split into synthesized chunks carrying its parts. One
// releaser (release.go) does this: it owns the output, what was sent and
// what waits, and alone frames and writes the client's stream.
// Tool-call deltas are held until the calls are complete and checked.
//
// # Repair
//
// A failed attempt whose verdict action is a retry is cancelled at once
// (closing the upstream request, which stops the generation) and retried
// with a correction that fits the reason (see corrected in retry.go):
// grammar/JSON-schema constrained decoding for JSON failures, DRY and
// repeat-penalty sampling for loops, the violated requirement restated for
// the rest. When text was already released, the retry continues it as an
// assistant prefill (chat) or a longer prompt (completions): llama-server
// streams only the continuation, so the client reads one seamless answer:
// the retry's chunks are restamped with the first attempt's id, model and
// system_fingerprint (and created, unless the upstream stamps each chunk
// with its own time), and its role chunk is dropped.
// A continued prefix is never grammar-constrained (llama-server refuses a
// grammar whose start is already fixed). Retries are bounded by the
// policy's budgets and by MaxAttempts; optimistic mode never retries once
// text went out. The client's token limit (max_tokens,
// max_completion_tokens, n_predict, Ollama's num_predict) is for the whole
// answer it reads: a retry that continues released text asks only for what
// is left, and the usage counts move the prefill from prompt to completion
// (budget.go).
//
// A JSON error that jsonsyntax.Repair fixes mechanically (the fix_syntax
// hint: a trailing comma, single quotes, a code fence) is repaired locally
// without a round trip when nothing was released yet: the rest of the
// answer is read, repaired, and checked again; when it passes, it is the
// answer; otherwise the request is retried (fixsyntax.go).
//
// # Halts and errors
//
// A halt answers with the OpenAI error object {"error": {"message",
// "type", "code", "param"}} plus the verdict under "aegis". The code is
// "aegis_" + the reason code (ErrorCode). A non-streaming halt uses the
// HTTP status of HaltStatus: 403 for an output or input the policy
// refused, 502 upstream_error, 503 guard_unavailable, 504 stall; every
// halt carries X-Should-Retry: false. A streaming halt, once the upstream stream was open, is an
// in-band event — data: {"error": {...}, "aegis": {...}} — followed by
// data: [DONE], with status 200 (NDJSON: one {"error": "...", "aegis":
// {...}} line). Errors before any upstream stream — bad JSON (400),
// nesting deeper than MaxJSONDepth (400), a body over MaxBodyBytes (413),
// an unknown model (404 model_not_found), an unreachable upstream (502
// aegis_upstream_error), an upstream 4xx (passed on with its status and
// code upstream_rejected), a missing bearer token (401) — are plain HTTP
// errors for streaming clients too.
//
// # Verdict metadata
//
// The final chunk (streams) or the body (non-streaming) carries an "aegis"
// member: the verdict, request_id, attempts and repaired (the reasons a
// repair mended, absent when the first attempt passed). Response headers
// X-Aegis-Verdict (pass|fail), X-Aegis-Reason, X-Aegis-Attempts and
// X-Aegis-Repaired carry the same; on streams they are HTTP trailers (announced in the Trailer
// header), since the verdict is known only at the end. X-Aegis-Request-Id
// is sent at once.
//
// # Stall
//
// A timer armed at the checks' next deadline (the stall check's TTFT and
// gap deadlines) or, when no check sets one, at IdleTimeout cancels an
// upstream that stops sending. It runs from before the request is sent,
// so the TTFT deadline also covers an upstream that accepts the request
// and never answers with headers.
//
// # Upstream failures
//
// An upstream that fails mid-stream (closed, reset, garbage, an error
// event) ends the attempt's input: the checks judge the text as complete
// and what they pass is released before the halt, so the client keeps
// every byte it could be given. Invalid UTF-8 and lone UTF-16 surrogate
// escapes are replaced with U+FFFD once, with a finding. A response is
// capped at MaxResponseBytes. The upstream's health is then checked; a
// healthy upstream (or, when it is not, another upstream serving the same
// model) gets one retry continuing the released text; otherwise the
// request halts with aegis_stall.
//
// # Events
//
// Each request publishes RequestStarted, AttemptStarted, Verdict, Retry,
// Halt and RequestFinished on Events, with TTFT, the TTFT Aegis added
// (first chunk released minus first chunk read from the upstream), the most
// bytes held back, and the output text only when the policy's log_text is
// set; without it, quoted text in finding messages and errors (a span a
// rule matched, an upstream's error body) is replaced with [redacted]. The
// gateway writes no logs about requests itself.
package gateway
