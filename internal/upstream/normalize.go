package upstream

import (
	"fmt"
	"net/url"
	"strings"
)

// Normalize turns the ways people write a model server's address into
// the base URL Aegis needs, and says what it changed:
//
//	127.0.0.1:8080               -> http://127.0.0.1:8080  (no scheme: http)
//	localhost:11434              -> http://localhost:11434
//	http://127.0.0.1:8080/v1     -> http://127.0.0.1:8080  (the OpenAI client's base URL)
//	http://127.0.0.1:8080/v1/    -> http://127.0.0.1:8080
//
// A base URL with another path (a server behind a path prefix) is kept.
func Normalize(raw string) (string, []string, error) {
	var notes []string
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", nil, fmt.Errorf("empty upstream URL")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
		notes = append(notes, fmt.Sprintf("upstream %q has no scheme: using %s", raw, s))
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", nil, fmt.Errorf("upstream %q is not a URL: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", nil, fmt.Errorf("upstream %q: want http://host:port or host:port", raw)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#") || u.User != nil {
		return "", nil, fmt.Errorf("upstream %q: want a base URL without query, fragment or user", raw)
	}
	path := strings.TrimRight(u.Path, "/")
	if strings.HasSuffix(path, "/v1") {
		for strings.HasSuffix(path, "/v1") {
			path = strings.TrimRight(strings.TrimSuffix(path, "/v1"), "/")
		}
		u.Path = path
		notes = append(notes, fmt.Sprintf("upstream %q ends in /v1, the OpenAI client's base URL: Aegis adds /v1 itself and uses %s", raw, u.String()))
	} else {
		u.Path = path
	}
	u.RawPath = ""
	return u.String(), notes, nil
}
