package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// readBody reads a request body within the size limit and checks its JSON
// nesting depth before any decoding, so a hostile body costs at most a
// linear scan. Its Content-Type is not checked: like Ollama and
// llama-server, the gateway reads JSON whatever the header says, and web
// pages are kept out by their Origin instead (see package origin).
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	return g.withReadDeadline(w, func() ([]byte, int, error) { return g.readJSON(w, r) })
}

func (g *Gateway) readJSON(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	body, err := readAll(http.MaxBytesReader(w, r.Body, g.maxBody()), r.ContentLength, g.maxBody())
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body larger than %d bytes", mbe.Limit)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("reading request body: %w", err)
	}
	if d := jsonDepth(body); d > g.maxDepth() {
		return nil, http.StatusBadRequest, fmt.Errorf("request JSON nested deeper than %d levels", g.maxDepth())
	}
	return body, 0, nil
}

// readAll is io.ReadAll for a body of declared length n: within the
// limit, it reads into one buffer of that size instead of growing one
// from 512 bytes, which copies a 60 KB agent request eight times over.
func readAll(r io.Reader, n, limit int64) ([]byte, error) {
	if n <= 0 || n > limit {
		return io.ReadAll(r)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// jsonDepth returns the deepest nesting of arrays and objects in b,
// ignoring brackets inside strings. It does not validate.
func jsonDepth(b []byte) int {
	depth, max := 0, 0
	inStr, esc := false, false
	for _, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
			if depth > max {
				max = depth
			}
		case '}', ']':
			depth--
		}
	}
	return max
}

// rawBody is a request body as a top-level JSON object whose members are
// kept as raw JSON: fields Aegis does not change (llama-server's
// cache_prompt, id_slot, n_probs, grammar, ...) reach the upstream
// byte for byte.
type rawBody map[string]json.RawMessage

func (b rawBody) clone() rawBody {
	c := make(rawBody, len(b)+4)
	for k, v := range b {
		c[k] = v
	}
	return c
}

// set encodes v under key.
func (b rawBody) set(key string, v any) {
	enc, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("gateway: encoding %s: %v", key, err)) // only our own values are set
	}
	b[key] = enc
}

// object returns the member key decoded as an object (empty when absent
// or not an object).
func (b rawBody) object(key string) rawBody {
	var o rawBody
	if raw, ok := b[key]; ok {
		json.Unmarshal(raw, &o)
	}
	if o == nil {
		o = rawBody{}
	}
	return o
}

func (b rawBody) encode() []byte {
	enc, err := json.Marshal(map[string]json.RawMessage(b))
	if err != nil {
		panic(fmt.Sprintf("gateway: encoding request: %v", err))
	}
	return enc
}

// meta is the "aegis" extension field carried by the final chunk or body
// and by error bodies: the verdict plus how it was reached.
type meta struct {
	validator.Verdict
	RequestID string `json:"request_id"`
	// Attempts is how many upstream attempts were made (1 = no retry).
	Attempts int `json:"attempts"`
	// Repaired names the reasons of the failures a repair (a hidden retry
	// or a local fix) mended before the answer passed; empty when the
	// first attempt passed as it was.
	Repaired []validator.Reason `json:"repaired,omitempty"`
}

// Response headers carrying the verdict. For streams they are HTTP
// trailers (announced in the Trailer header), since the verdict is known
// only at the end; the final chunk's "aegis" field carries it in-band.
const (
	HeaderVerdict   = "X-Aegis-Verdict"
	HeaderReason    = "X-Aegis-Reason"
	HeaderAttempts  = "X-Aegis-Attempts"
	HeaderRequestID = "X-Aegis-Request-Id"
	// HeaderRepaired lists the repaired reasons, comma-separated.
	HeaderRepaired = "X-Aegis-Repaired"
)

func setVerdictHeaders(h http.Header, m *meta) {
	h.Set(HeaderVerdict, string(m.Verdict.Verdict))
	if m.Reason != validator.ReasonNone {
		h.Set(HeaderReason, string(m.Reason))
	}
	h.Set(HeaderAttempts, strconv.Itoa(m.Attempts))
	if len(m.Repaired) > 0 {
		rs := make([]string, len(m.Repaired))
		for i, r := range m.Repaired {
			rs[i] = string(r)
		}
		h.Set(HeaderRepaired, strings.Join(rs, ","))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
