// Package upstream talks to the model servers Aegis guards: llama-server,
// Ollama and any OpenAI-compatible server. It detects which kind a URL
// is, sends requests over connections that survive servers closing
// keep-alive connections (llama-server answers "Keep-Alive: timeout=5,
// max=100"), and checks health. The transport and the resend rule are
// the llama-server client's (internal/llamaserver), with a pool sized
// for one connection per concurrent stream.
package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aegis-sentinel/aegis/internal/llamaserver"
)

// Kind is the API dialect of an upstream server.
type Kind int

// The kinds of upstream.
const (
	KindUnknown Kind = iota
	KindLlamaServer
	KindOllama
	KindOpenAI
)

func (k Kind) String() string {
	switch k {
	case KindLlamaServer:
		return "llama-server"
	case KindOllama:
		return "ollama"
	case KindOpenAI:
		return "openai"
	}
	return "unknown"
}

// ParseKind parses "llama-server", "ollama" or "openai" (and "" or "auto"
// as KindUnknown, meaning: detect).
func ParseKind(s string) (Kind, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return KindUnknown, nil
	case "llama-server", "llama", "llama.cpp", "llamacpp":
		return KindLlamaServer, nil
	case "ollama":
		return KindOllama, nil
	case "openai":
		return KindOpenAI, nil
	}
	return KindUnknown, fmt.Errorf("unknown upstream kind %q (want llama-server, ollama or openai)", s)
}

// MarshalText encodes the kind by name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText decodes a kind name.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// Upstream is one model server.
type Upstream struct {
	// Name identifies the upstream in logs, events and errors.
	Name string
	// URL is the server's base URL, such as http://127.0.0.1:8080.
	URL *url.URL
	// Kind is the server's dialect.
	Kind Kind
	// Models lists the model names routed here; empty means any.
	Models []string
	// Client sends the requests. Nil means NewClient().
	Client *http.Client
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	// Resends is how many times a request that met a closed connection
	// before any response byte is sent again. Zero means 1.
	Resends int
}

// New returns an Upstream for rawURL with a fresh client.
func New(name, rawURL string, kind Kind) (*Upstream, error) {
	u, err := url.Parse(strings.TrimRight(rawURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", name, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("upstream %s: want an http(s) URL with a host, got %q", name, rawURL)
	}
	return &Upstream{Name: name, URL: u, Kind: kind, Client: NewClient()}, nil
}

// NewClient returns an HTTP client tuned for streaming from local model
// servers: no overall timeout (streams are long; callers use contexts),
// many idle connections per host (one per concurrent stream), and an idle
// timeout below llama-server's keep-alive timeout of 5 s, so Aegis drops a
// pooled connection before the server does.
func NewClient() *http.Client {
	tr := llamaserver.NewTransport(4096)
	// A fast stream queues many small chunks between two reads: a 16 KiB
	// read buffer takes them in one system call where the default 4 KiB
	// took four (a 128-token answer under load: 8 reads instead of 14).
	tr.ReadBufferSize = 16 << 10
	return &http.Client{Transport: tr}
}

func (u *Upstream) client() *http.Client {
	if u.Client != nil {
		return u.Client
	}
	return http.DefaultClient
}

// Serves reports whether the upstream serves model (any model when
// Models is empty).
func (u *Upstream) Serves(model string) bool {
	if len(u.Models) == 0 {
		return true
	}
	for _, m := range u.Models {
		if m == model || strings.HasSuffix(m, "*") && strings.HasPrefix(model, strings.TrimSuffix(m, "*")) {
			return true
		}
	}
	return false
}

// Endpoint returns the absolute URL of path on the upstream.
func (u *Upstream) Endpoint(path string) string {
	return u.URL.String() + path
}

// Post sends body to path and returns the response once its headers have
// arrived. A request whose connection failed before any byte of a
// response arrived (a pooled keep-alive connection the server had closed,
// a reset) is sent again once at most, so the caller rarely sees such an
// error and the server never sees one request more than twice. A failure
// after the first response byte is never resent.
func (u *Upstream) Post(ctx context.Context, path string, body []byte, hdr http.Header) (*http.Response, error) {
	resends := u.Resends
	if resends == 0 {
		resends = 1
	}
	resp, err := llamaserver.Resend(ctx, resends, func(ctx context.Context) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.Endpoint(path), bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		if u.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+u.APIKey)
		}
		return u.client().Do(req)
	})
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", u.Name, &requestError{http.MethodPost, path, err})
	}
	return resp, nil
}

// Get fetches path with a short timeout and returns status and body (up
// to 1 MiB).
func (u *Upstream) Get(ctx context.Context, path string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.Endpoint(path), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("upstream %s: %w", u.Name, err)
	}
	if u.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+u.APIKey)
	}
	resp, err := u.client().Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("upstream %s: %w", u.Name, &requestError{http.MethodGet, path, err})
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("upstream %s: GET %s: %w", u.Name, path, err)
	}
	return resp.StatusCode, b, nil
}

// Detect finds the upstream's kind by probing: llama-server answers GET
// /props with its generation settings, Ollama answers GET /api/version,
// anything else that answers is taken as OpenAI-compatible. It fails only
// when the server cannot be reached at all.
func Detect(ctx context.Context, u *Upstream) (Kind, error) {
	code, body, err := u.Get(ctx, "/props")
	if err != nil {
		return KindUnknown, fmt.Errorf("detecting kind: %w", err)
	}
	if code == http.StatusOK {
		var p map[string]json.RawMessage
		if json.Unmarshal(body, &p) == nil {
			if _, ok := p["default_generation_settings"]; ok {
				return KindLlamaServer, nil
			}
		}
	}
	if code, body, err = u.Get(ctx, "/api/version"); err == nil && code == http.StatusOK {
		var v struct {
			Version *string `json:"version"`
		}
		if json.Unmarshal(body, &v) == nil && v.Version != nil {
			return KindOllama, nil
		}
	}
	return KindOpenAI, nil
}

// Health checks that the upstream can serve: llama-server's /health must
// say ok (it answers 503 while loading), Ollama's /api/version must
// answer, an OpenAI-compatible server must list its models.
func (u *Upstream) Health(ctx context.Context) error {
	path := "/v1/models"
	switch u.Kind {
	case KindLlamaServer:
		path = "/health"
	case KindOllama:
		path = "/api/version"
	}
	code, body, err := u.Get(ctx, path)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("upstream %s: %s answered %d: %.200s", u.Name, path, code, body)
	}
	return nil
}
