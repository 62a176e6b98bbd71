package gateway

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// apiError is the OpenAI error object.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Param   *string `json:"param"`
}

// errorBody is the body of an error response: the OpenAI error object
// and, for halts, Aegis's verdict.
type errorBody struct {
	Error apiError `json:"error"`
	Aegis *meta    `json:"aegis,omitempty"`
}

// ErrorCode returns the documented error code of a halt for reason:
// "aegis_" followed by the reason code, such as aegis_repetition_loop.
func ErrorCode(reason validator.Reason) string {
	if reason == validator.ReasonNone {
		return "aegis_error"
	}
	return "aegis_" + string(reason)
}

// HaltStatus returns the HTTP status of a non-streaming halt for reason:
//
//	403 Forbidden             the policy refused the output (it failed a
//	                          check: invalid_json, schema_violation,
//	                          repetition_loop, leaks, ...) or the input
//	                          (prompt_injection, any block)
//	502 Bad Gateway           upstream_error
//	503 Service Unavailable   guard_unavailable
//	504 Gateway Timeout       stall
//
// A policy refusal is 403 because it is the status no common client
// retries: LangChain JS retries every status but 400-407, 409 and 413,
// the Vercel AI SDK retries 408, 409, 429 and 5xx, and the openai SDK
// retries 408, 409, 429 and 5xx unless the response says
// x-should-retry: false, which every halt sends (see markFinal). The
// unavailability halts keep their 5xx statuses, which monitoring and load
// balancers read as the gateway's or upstream's failure.
func HaltStatus(reason validator.Reason, action validator.Action) int {
	switch reason {
	case validator.ReasonUpstreamError:
		return http.StatusBadGateway
	case validator.ReasonGuardUnavailable:
		return http.StatusServiceUnavailable
	case validator.ReasonStall:
		return http.StatusGatewayTimeout
	}
	return http.StatusForbidden
}

// errorType is the OpenAI "type" of a halt.
func errorType(reason validator.Reason, action validator.Action) string {
	switch {
	case action == validator.ActionBlock || reason == validator.ReasonPromptInjection:
		return "aegis_blocked"
	case reason == validator.ReasonUpstreamError || reason == validator.ReasonStall || reason == validator.ReasonGuardUnavailable:
		return "aegis_unavailable"
	}
	return "aegis_halted"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding failed","type":"server_error","code":"aegis_error","param":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, status int, e apiError, m *meta) {
	if m != nil {
		setVerdictHeaders(w.Header(), m)
	}
	writeJSON(w, status, errorBody{Error: e, Aegis: m})
}

// upstreamCode is the error code of an upstream's 4xx refusal: a 404 on
// a generating route means the upstream does not have the model (Ollama:
// model "x" not found), anything else is upstream_rejected.
func upstreamCode(status int, msg string) string {
	if status == http.StatusNotFound && strings.Contains(strings.ToLower(msg), "model") {
		return "model_not_found"
	}
	return "upstream_rejected"
}

func haltMessage(v validator.Verdict) string {
	for _, f := range v.Findings {
		if f.Reason == v.Reason && f.Message != "" {
			return "aegis stopped the response (" + string(v.Reason) + "): " + f.Message
		}
	}
	return "aegis stopped the response (" + string(v.Reason) + ")"
}

// fail writes an error in the shape the client of path expects: Ollama's
// {"error": "..."} under /api/, the Messages API's under /v1/messages,
// else the OpenAI error object.
func fail(w http.ResponseWriter, path string, status int, e apiError) {
	if strings.HasPrefix(path, "/api/") {
		writeJSON(w, status, map[string]string{"error": e.Message})
		return
	}
	if strings.HasPrefix(path, "/v1/messages") {
		writeJSON(w, status, anthropicError(e, nil))
		return
	}
	writeError(w, status, e, nil)
}
