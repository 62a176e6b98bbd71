package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTestbedMirrorFromAptSources: scripts/testbed takes debootstrap's
// mirror from the machine's apt sources (one-line and deb822 formats,
// skipping security and backports suites and disabled stanzas), and fails
// with a clear message when none is configured.
func TestTestbedMirrorFromAptSources(t *testing.T) {
	script, err := filepath.Abs("../../scripts/testbed")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // "" means: a clear failure
	}{
		{"one-line", map[string]string{"sources.list": "# comment\ndeb http://security.example/debian-security bookworm-security main\n" +
			"deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://ftp.example.org/debian/ bookworm main\n"}, "http://ftp.example.org/debian"},
		{"deb822", map[string]string{"sources.list.d/debian.sources": "Types: deb\nURIs: http://security.example/debian-security\n" +
			"Suites: bookworm-security\nComponents: main\n\nTypes: deb\nEnabled: no\nURIs: http://off.example/debian\nSuites: trixie\n\n" +
			"Types: deb deb-src\nURIs: http://mirror.example/debian http://second.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"},
			"http://mirror.example/debian"},
		{"list file", map[string]string{"sources.list.d/local.list": "deb http://local.example/debian sid main\n"}, "http://local.example/debian"},
		{"none configured", map[string]string{"sources.list": "# nothing here\n"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etc := t.TempDir()
			os.MkdirAll(filepath.Join(etc, "sources.list.d"), 0o755)
			for name, body := range tc.files {
				if err := os.WriteFile(filepath.Join(etc, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(script, "mirror")
			cmd.Env = append(os.Environ(), "AEGIS_TESTBED_APT_ETC="+etc, "AEGIS_TESTBED_MIRROR=", "AEGIS_TESTBED_STATE="+t.TempDir())
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if tc.want == "" {
				if err == nil || !strings.Contains(stderr.String(), "no Debian package mirror") || !strings.Contains(stderr.String(), "AEGIS_TESTBED_MIRROR") {
					t.Fatalf("want a clear failure, got %q, err %v, stderr %s", out, err, stderr.String())
				}
				return
			}
			if err != nil || strings.TrimSpace(string(out)) != tc.want {
				t.Fatalf("mirror %q (err %v, stderr %s), want %s", out, err, stderr.String(), tc.want)
			}
		})
	}
}

// TestDemoInstallSkipsOllama: the demo brings the testbed up with the
// servers it does not use skipped; installing for it must not build
// Ollama (a fake go on PATH records any attempt).
func TestDemoInstallSkipsOllama(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	demo, err := os.ReadFile(filepath.Join(root, "scripts", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`AEGIS_TESTBED_SKIP:-([a-z,-]+)\}`).FindSubmatch(demo)
	if m == nil || !strings.Contains(string(m[1]), "ollama") {
		t.Fatalf("scripts/demo does not skip ollama: %q", m)
	}
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "go-calls")
	for name, body := range map[string]string{
		"llama-server": "#!/bin/sh\necho fake llama-server\n",
		"go":           "#!/bin/sh\necho \"$@\" >>" + calls + "\nexit 1\n",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "testbed"), "install")
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "PATH" && k != "CI" && k != "AEGIS_REQUIRE_TESTBED" && k != "AEGIS_TESTBED_CHROMIUM" {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PATH="+bin+":/usr/sbin:/usr/bin:/sbin:/bin", "AEGIS_TESTBED_SKIP="+string(m[1]),
		"AEGIS_TESTBED_CACHE="+t.TempDir(), "AEGIS_TESTBED_STATE="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if b, _ := os.ReadFile(calls); len(b) > 0 {
		t.Fatalf("installing for the demo ran go %s\n%s", b, out)
	}
	if err != nil {
		t.Fatalf("install for the demo: %v\n%s", err, out)
	}
}
