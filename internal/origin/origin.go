// Package origin keeps web pages a browser opens from using a local
// server behind the user's back, the way Ollama guards its API.
//
// Two rules apply to every endpoint. A request whose Origin header names
// a page on another site is refused, unless that origin is allowed:
// loopback origins (http://localhost:3000, http://127.0.0.1:5173) and the
// server's own address are allowed by default, others by an allow-list.
// And on a loopback listener without a bearer token, a request whose
// Host is a DNS name other than localhost is refused, so a page that
// rebinds its own name to 127.0.0.1 cannot reach the server either.
// Requests without an Origin (curl, SDKs, scripts) are unaffected, so a
// JSON body is accepted whatever its Content-Type says.
package origin

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Policy decides which browser origins and Host names are answered.
type Policy struct {
	// CheckHost refuses Host names other than localhost, IP literals and
	// AllowHosts. Set it for a loopback listener without a token.
	CheckHost bool
	// AllowHosts lists extra Host names answered when CheckHost is set.
	AllowHosts []string
	// AllowOrigins lists extra origins (scheme://host[:port]) whose pages
	// may call the server; "*" allows every origin.
	AllowOrigins []string
	// HostFlag and OriginFlag name the options that extend the lists
	// (such as --allow-host), for the refusals to point at; empty when
	// the command has none.
	HostFlag, OriginFlag string
}

// Validate checks that every allowed origin is "*", "null" or
// scheme://host[:port] with nothing after it.
func (p *Policy) Validate() error {
	for _, o := range p.AllowOrigins {
		if o == "*" || o == "null" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("allowed origin %q: want scheme://host[:port], such as https://app.example.com, or *", o)
		}
	}
	for _, h := range p.AllowHosts {
		if h == "" || strings.ContainsAny(h, "/:@ ") {
			return fmt.Errorf("allowed host %q: want a host name, such as gateway.internal", h)
		}
	}
	return nil
}

// HostAllowed reports whether a request's Host (host or host:port) is
// localhost, an IP literal, or one of extra.
func HostAllowed(host string, extra []string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" || strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil {
		return true
	}
	for _, a := range extra {
		if strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// loopbackHost reports whether an origin's host names this machine.
func loopbackHost(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// OriginAllowed reports whether a page from origin may call the server
// that r reached.
func (p *Policy) OriginAllowed(origin string, r *http.Request) bool {
	origin = strings.TrimSuffix(origin, "/")
	for _, a := range p.AllowOrigins {
		if a == "*" || strings.EqualFold(strings.TrimSuffix(a, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return false // "null" (sandboxed pages, file://) and other schemes
	}
	if loopbackHost(u.Hostname()) {
		return true
	}
	// The server's own pages (the dashboard reached by its address).
	return strings.EqualFold(u.Host, r.Host) && HostAllowed(r.Host, p.AllowHosts)
}

// Wrap applies the policy in front of h. Allowed cross-origin pages get
// CORS headers, so a local web app can read the answers; preflight
// requests from them are answered here.
func (p *Policy) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.CheckHost && !HostAllowed(r.Host, p.AllowHosts) {
			msg := fmt.Sprintf("Host %q is not answered here (DNS rebinding protection): use localhost or an IP address", r.Host)
			if p.HostFlag != "" {
				msg += ", or allow the name with " + p.HostFlag
			}
			refuse(w, r, "host_not_allowed", msg)
			return
		}
		o := r.Header.Get("Origin")
		if o == "" {
			h.ServeHTTP(w, r)
			return
		}
		if !p.OriginAllowed(o, r) {
			msg := fmt.Sprintf("requests from web pages at %q are not answered (only loopback origins are)", o)
			if p.OriginFlag != "" {
				msg = fmt.Sprintf("requests from web pages at %q are not answered: allow the origin with %s (loopback origins are allowed)", o, p.OriginFlag)
			}
			refuse(w, r, "origin_not_allowed", msg)
			return
		}
		hd := w.Header()
		hd.Add("Vary", "Origin")
		hd.Set("Access-Control-Allow-Origin", o)
		hd.Set("Access-Control-Expose-Headers", "*")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			hd.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS")
			if rh := r.Header.Get("Access-Control-Request-Headers"); rh != "" {
				hd.Set("Access-Control-Allow-Headers", rh)
			}
			hd.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// refuse answers 403 with an OpenAI-shaped error object, or Ollama's
// {"error": "..."} on its /api/ paths.
func refuse(w http.ResponseWriter, r *http.Request, code, msg string) {
	var b []byte
	if strings.HasPrefix(r.URL.Path, "/api/") {
		b, _ = json.Marshal(map[string]string{"error": msg})
	} else {
		b, _ = json.Marshal(map[string]any{"error": map[string]any{
			"message": msg, "type": "invalid_request_error", "code": code, "param": nil}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	w.Write(b)
}
