package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestServerNameFromCommand(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"npx package", []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/me"}, "server-filesystem"},
		{"npx package with version", []string{"npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"}, "server-everything"},
		{"node script in node_modules", []string{"node", "/c/node_modules/@scope/server-x/dist/index.js", "stdio"}, "server-x"},
		{"uvx", []string{"uvx", "mcp-server-git", "--repository", "."}, "mcp-server-git"},
		{"python script", []string{"python3", "/srv/weather.py"}, "weather"},
		{"a binary", []string{"/usr/local/bin/github-mcp-server", "stdio"}, "github-mcp-server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := serverNameFromCommand(tc.args); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMCPCommandErrors(t *testing.T) {
	db := filepath.Join(t.TempDir(), "incidents.db")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"http without upstream", []string{"mcp", "http", "--incidents-db", db}, ExitUsage, "--upstream"},
		{"http with a bad upstream", []string{"mcp", "http", "--upstream", "ftp://x", "--incidents-db", db}, ExitUsage, "http://"},
		{"stdio without a command", []string{"mcp", "stdio", "--incidents-db", db}, ExitUsage, ""},
		{"a bad policy", []string{"mcp", "stdio", "--policy", "/nonexistent.yaml", "--incidents-db", db, "--", "true"}, ExitUsage, "nonexistent"},
		{"approving an unknown tool", []string{"mcp", "pins", "approve", "srv", "tool", "--incidents-db", db}, ExitFailure, "no pin for srv/tool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
	out, _, code := runCLI(t, "mcp", "pins", "--incidents-db", db)
	if code != 0 || !strings.HasPrefix(out, "SERVER") {
		t.Errorf("empty pins: exit %d %q", code, out)
	}
}
