package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/policy"
	"go.yaml.in/yaml/v3"
)

// listenAddr reads --listen: host:port, or a bare port (on loopback).
func listenAddr(s string) (string, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 65535 {
			return "", fmt.Errorf("--listen %s: port out of range 0..65535", s)
		}
		return net.JoinHostPort("127.0.0.1", s), nil
	}
	if _, port, err := net.SplitHostPort(s); err == nil && port != "" {
		return s, nil
	}
	// A host alone ("0.0.0.0", "::1", "localhost") takes the default port.
	if h := strings.Trim(s, "[]"); h != "" && !strings.ContainsAny(h, "/ ") && (net.ParseIP(h) != nil || !strings.Contains(h, ":")) {
		return net.JoinHostPort(h, "8088"), nil
	}
	return "", fmt.Errorf("--listen %q: want host:port (such as 127.0.0.1:8088), a host, or a port number", s)
}

// shownAddr is the address a listener took, written with the host it was
// asked for: Go listens on 0.0.0.0 as [::] (both address families), which
// would confuse a message about the 0.0.0.0 the user wrote.
func shownAddr(listenAt string, addr net.Addr) string {
	h, _, err1 := net.SplitHostPort(listenAt)
	_, p, err2 := net.SplitHostPort(addr.String())
	if err1 != nil || err2 != nil || h == "" {
		return addr.String()
	}
	return net.JoinHostPort(h, p)
}

// isLoopback reports whether a listener's address is a loopback one.
func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// checkExposure refuses a listener other hosts can reach when no token
// guards it, unless insecure is set; then it warns.
func checkExposure(addr net.Addr, shown string, hasToken, insecure bool, log *slog.Logger) error {
	if isLoopback(addr) || hasToken {
		return nil
	}
	if !insecure {
		return usagef("refusing to listen on %s without a bearer token: any host that reaches it can use the "+
			"model and read the dashboard and incidents; set --auth-token-file (or AEGIS_AUTH_TOKEN), listen on "+
			"127.0.0.1, or pass --insecure-no-auth", shown)
	}
	log.Warn(fmt.Sprintf("SECURITY: listening on %s with no bearer token (--insecure-no-auth): every host that "+
		"reaches this address can use the model, the dashboard and the incident log", shown))
	return nil
}

// policyPathFrom resolves a policy path given in a config file against the
// config file's folder.
func policyPathFrom(configPath, p string) string {
	if p == "" || filepath.IsAbs(p) || configPath == "" {
		return p
	}
	return filepath.Join(filepath.Dir(configPath), p)
}

// guardKeyLine returns the line of key in the policy's guard section, or 0.
func guardKeyLine(p *policy.Policy, key string) int {
	n := &p.Guard
	if n.Kind != yaml.MappingNode {
		return n.Line
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if strings.EqualFold(n.Content[i].Value, key) {
			return n.Content[i+1].Line
		}
	}
	return n.Line
}

// checkDefault refuses a default: that names no upstream: every request
// for a model no upstream lists would otherwise fail.
func checkDefault(cfg *serveConfig) error {
	if cfg.Default == "" {
		return nil
	}
	var names []string
	for i, uc := range cfg.Upstreams {
		name := uc.Name
		if name == "" {
			name = fmt.Sprintf("upstream%d", i+1)
		}
		if name == cfg.Default {
			return nil
		}
		names = append(names, name)
	}
	return usagef("config: default: %q names no upstream (the upstreams are %s)", cfg.Default, strings.Join(names, ", "))
}

// checkFile refuses a file named by flag that cannot be read, before
// anything else is looked for (a missing model is the first thing to
// fix, whatever else is missing too).
func checkFile(flag, path string) error {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return usagef("%s %s: %v", flag, path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return usagef("%s %s: is a folder, want a file", flag, path)
	}
	return nil
}
