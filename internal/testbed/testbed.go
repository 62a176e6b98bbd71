// Package testbed finds the real backend servers that scripts/testbed
// started, so integration tests can talk to a real llama-server (CPU and
// Vulkan0), a real Ollama, PostgreSQL and nats-server. Tests that stop and
// restart an engine start a private one from the same binaries
// (StartPostgres, StartNATS) rather than disturb the shared servers.
//
// scripts/testbed up writes KEY=VALUE lines to .testbed/env at the
// repository root. Load reads that file (or the file named by
// AEGIS_TESTBED_ENV); variables already in the environment win. Require
// fails a test when the testbed is missing and integration tests are
// mandatory (CI=true or AEGIS_REQUIRE_TESTBED=1), and skips it otherwise, so
// `go test ./...` on a laptop without the servers still runs the unit tests.
package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/llamaserver"
)

// Env describes a running testbed. Empty fields mean that server was not
// started (AEGIS_TESTBED_SKIP).
type Env struct {
	Model          string // path of stories260K.gguf
	LlamaServer    string // path of the llama-server binary (or wrapper)
	LlamaCPUURL    string // llama-server on the CPU backend
	LlamaVulkanURL string // llama-server on Vulkan0 (llvmpipe)
	// LlamaAgentURL is a CPU llama-server for coding agents: 32K tokens of
	// context per slot, greedy, every answer ended after 160 characters.
	LlamaAgentURL string
	// LlamaReasoningURL is a CPU llama-server whose thinking template and
	// grammar make the model reason first (naming the passphrase
	// KESTREL-7731), then answer: reasoning_content, thinking blocks and
	// reasoning items from the real server.
	LlamaReasoningURL string
	OllamaURL         string // ollama serve
	OllamaModel       string // name of the model created in Ollama
	PostgresURL       string // PostgreSQL with trust auth, database "aegis"
	PGBin             string // directory of the PostgreSQL binaries (initdb, postgres)
	NATSURL           string // nats-server with JetStream
	NATSServer        string // path of the nats-server binary
	// Jaeger, traces kept in memory: its OTLP receivers and query API.
	JaegerOTLPHTTP string // OTLP over HTTP, such as http://127.0.0.1:PORT
	JaegerOTLPGRPC string // OTLP over gRPC
	JaegerQueryURL string // the query API (and UI)
}

// Load reads the testbed environment. It returns an error naming the file
// when nothing is found.
func Load() (*Env, error) {
	vals := map[string]string{}
	path := os.Getenv("AEGIS_TESTBED_ENV")
	if path == "" {
		root, err := repoRoot()
		if err != nil {
			return nil, err
		}
		path = filepath.Join(root, ".testbed", "env")
	}
	if f, err := os.Open(path); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return nil, fmt.Errorf("testbed: %s:%d: want KEY=VALUE, got %q", path, n, line)
			}
			vals[k] = v
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("testbed: reading %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	get := func(k string) string {
		if v, ok := os.LookupEnv(k); ok {
			return v
		}
		return vals[k]
	}
	e := &Env{
		Model:             get("AEGIS_TESTBED_MODEL"),
		LlamaServer:       get("AEGIS_TESTBED_LLAMA_SERVER"),
		LlamaCPUURL:       get("AEGIS_TESTBED_LLAMA_CPU_URL"),
		LlamaVulkanURL:    get("AEGIS_TESTBED_LLAMA_VULKAN_URL"),
		LlamaAgentURL:     get("AEGIS_TESTBED_LLAMA_AGENT_URL"),
		LlamaReasoningURL: get("AEGIS_TESTBED_LLAMA_REASONING_URL"),
		OllamaURL:         get("AEGIS_TESTBED_OLLAMA_URL"),
		OllamaModel:       get("AEGIS_TESTBED_OLLAMA_MODEL"),
		PostgresURL:       get("AEGIS_TESTBED_POSTGRES_URL"),
		PGBin:             get("AEGIS_TESTBED_PG_BIN"),
		NATSURL:           get("AEGIS_TESTBED_NATS_URL"),
		NATSServer:        get("AEGIS_TESTBED_NATS_SERVER"),
		JaegerOTLPHTTP:    get("AEGIS_TESTBED_JAEGER_OTLP_HTTP"),
		JaegerOTLPGRPC:    get("AEGIS_TESTBED_JAEGER_OTLP_GRPC"),
		JaegerQueryURL:    get("AEGIS_TESTBED_JAEGER_QUERY_URL"),
	}
	if e.LlamaCPUURL == "" && e.LlamaVulkanURL == "" && e.LlamaAgentURL == "" && e.LlamaReasoningURL == "" && e.OllamaURL == "" && e.PostgresURL == "" && e.NATSURL == "" {
		return nil, fmt.Errorf("testbed: no servers found in %s or the environment; run scripts/testbed up", path)
	}
	return e, nil
}

// Mandatory reports whether integration tests must run (CI=true or
// AEGIS_REQUIRE_TESTBED=1) rather than skip when the testbed is missing.
func Mandatory() bool {
	return os.Getenv("CI") == "true" || os.Getenv("AEGIS_REQUIRE_TESTBED") == "1"
}

// Require returns the testbed or ends the test: a failure when integration
// tests are mandatory, a skip otherwise. Each need names a server that
// must be present: "llama-cpu", "llama-vulkan", "llama-agent",
// "llama-reasoning", "ollama", "postgres", "nats", "jaeger".
func Require(t testing.TB, needs ...string) *Env {
	t.Helper()
	if testing.Short() && !Mandatory() {
		t.Skip("integration test skipped in -short mode")
	}
	e, err := Load()
	if err == nil {
		for _, n := range needs {
			var have string
			switch n {
			case "llama-cpu":
				have = e.LlamaCPUURL
			case "llama-vulkan":
				have = e.LlamaVulkanURL
			case "llama-agent":
				have = e.LlamaAgentURL
			case "llama-reasoning":
				have = e.LlamaReasoningURL
			case "ollama":
				have = e.OllamaURL
			case "postgres":
				have = e.PostgresURL
			case "nats":
				have = e.NATSURL
			case "jaeger":
				have = e.JaegerQueryURL
			default:
				t.Fatalf("testbed.Require: unknown server %q", n)
			}
			if have == "" {
				err = fmt.Errorf("testbed: server %q is not running (started without it?)", n)
				break
			}
		}
	}
	if err != nil {
		if Mandatory() {
			t.Fatalf("integration test needs the real testbed: %v", err)
		}
		t.Skipf("%v (set CI=true to make this a failure)", err)
	}
	return e
}

// repoRoot walks up from the working directory to the directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testbed: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testbed: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// HTTPClient is the client tests use to talk to the testbed's servers
// directly: the llama-server client, which resends a POST that met one of
// llama-server's closed keep-alive connections (without it a test fails
// now and then with EOF).
var HTTPClient = llamaserver.NewClient(2 * time.Minute)

// FindShared returns the path of shared/<rel>, the team's datasets and
// models, found beside the working directory or any directory above it
// (a checkout and its worktrees sit below the folder that holds shared/).
func FindShared(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testbed: %w", err)
	}
	for {
		p := filepath.Join(dir, "shared", rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testbed: shared/%s not found above the working directory", rel)
		}
		dir = parent
	}
}

// Shared returns the path of shared/<rel> or ends the test as Require
// does: a failure when integration tests are mandatory, a skip otherwise.
func Shared(t testing.TB, rel string) string {
	t.Helper()
	p, err := FindShared(rel)
	if err != nil {
		if Mandatory() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return p
}
