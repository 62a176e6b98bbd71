package testbed

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pathWithout returns a PATH directory that holds every command of the
// machine's usual bin directories except the ones named.
func pathWithout(t *testing.T, without ...string) string {
	t.Helper()
	dir := t.TempDir()
	skip := map[string]bool{}
	for _, w := range without {
		skip[w] = true
	}
	for _, d := range []string{"/usr/local/go/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if skip[e.Name()] {
				continue
			}
			os.Symlink(filepath.Join(d, e.Name()), filepath.Join(dir, e.Name())) // the first one wins, as on PATH
		}
	}
	return dir
}

// TestScriptsNameMissingTools: the scripts check for the tools they need
// besides Go (curl, python3, node, npm, a C compiler) and name the missing
// ones and their Debian packages, instead of failing later on a command
// not found.
func TestScriptsNameMissingTools(t *testing.T) {
	script, _ := filepath.Abs("../../scripts/testbed")
	path := pathWithout(t, "curl", "python3", "node", "nodejs", "npm", "cc", "gcc", "c99", "c89", "clang")
	for _, tc := range []struct {
		purpose string
		want    []string
	}{
		{"test", []string{"curl", "python3", "node", "npm", "a C compiler", "nodejs", "gcc", "go test -race"}},
		{"demo", []string{"curl", "python3"}},
	} {
		cmd := exec.Command(script, "tools", tc.purpose, "--check")
		cmd.Env = append(os.Environ(), "PATH="+path, "CC=", "AEGIS_TESTBED_STATE="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("%s: succeeded without the tools: %s", tc.purpose, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: the message lacks %q: %s", tc.purpose, w, out)
			}
		}
		if tc.purpose == "demo" && strings.Contains(string(out), "missing: curl, python3, node") {
			t.Errorf("demo asks for node: %s", out)
		}
	}
	cmd := exec.Command(script, "tools", "test", "--check")
	cmd.Env = append(os.Environ(), "AEGIS_TESTBED_STATE="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("with every tool installed: %v: %s", err, out)
	}
}

// TestScriptsTestSaysWhenGoTestFails: when go test fails, scripts/test
// says so, that the real clients were not run, and which package and test
// failed, and exits non-zero; its go test output carries progress lines.
func TestScriptsTestSaysWhenGoTestFails(t *testing.T) {
	root, _ := filepath.Abs("../..")
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	// A testbed that looks up (its pid file names a sleeping child, and
	// its env file is there, so up finds it running and starts nothing),
	// and a go whose test run fails in one package.
	state := t.TempDir()
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	os.WriteFile(filepath.Join(state, "fake.pid"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0o644)
	os.WriteFile(filepath.Join(state, "env"), []byte("AEGIS_TESTBED_JAEGER_QUERY_URL=http://127.0.0.1:1\n"), 0o644)
	fakeGo := filepath.Join(t.TempDir(), "go")
	os.WriteFile(fakeGo, []byte(`#!/usr/bin/env bash
case "$1" in
vet) exit 0 ;;
test)
	echo '{"Action":"start","Package":"example/a"}'
	echo '{"Action":"run","Package":"example/a","Test":"TestSlow"}'
	echo '{"Action":"output","Package":"example/a","Test":"TestSlow","Output":"    a_test.go:9: deadline exceeded\n"}'
	echo '{"Action":"fail","Package":"example/a","Test":"TestSlow","Elapsed":60}'
	echo '{"Action":"fail","Package":"example/a","Elapsed":61}'
	exit 1 ;;
*) exec `+realGo+` "$@" ;;
esac
`), 0o755)
	cmd := exec.Command(filepath.Join(root, "scripts/test"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GO="+fakeGo, "AEGIS_TESTBED_STATE="+state,
		"AEGIS_TESTBED_SKIP=llama-cpu,llama-vulkan,llama-agent,llama-reasoning,ollama,postgres,nats,jaeger")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("scripts/test succeeded: %s", out)
	}
	for _, w := range []string{"FAIL\texample/a", "deadline exceeded", "FAILED at go test -race", "scripts/clients) were not run",
		"== go test: 1 of 1 packages FAILED", "failed: example/a TestSlow"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(string(out), "== clients") {
		t.Errorf("the clients ran after go test failed:\n%s", out)
	}
}

// TestScriptsBeat: scripts/beat prints a progress line while its command
// runs and exits with the command's status. The command waits for the
// line itself, so the test waits on an event, not on the clock.
func TestScriptsBeat(t *testing.T) {
	root, _ := filepath.Abs("../..")
	logPath := filepath.Join(t.TempDir(), "log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(root, "scripts/beat"), "a long step",
		"sh", "-c", `until grep -q "still running" "$1"; do sleep 0.05; done; exit 7`, "sh", logPath)
	cmd.Env = append(os.Environ(), "AEGIS_BEAT_SECONDS=0.05")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("scripts/beat: %v, want the command's exit status 7", err)
	}
	out, _ := os.ReadFile(logPath)
	if !strings.Contains(string(out), "... a long step: still running after ") {
		t.Errorf("no progress line:\n%s", out)
	}
	if err := exec.Command(filepath.Join(root, "scripts/beat"), "no command").Run(); err == nil {
		t.Error("scripts/beat without a command succeeded")
	}
}
