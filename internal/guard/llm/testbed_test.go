package llm

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

const story = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. One day she saw a big red ball."

// checkReal asks a real server for verdicts on every task and checks
// each parses and (on llama-server) carries the probability risk. A
// verdict may take minutes on a loaded machine (the test Ollama writes
// about a hundred tokens per verdict at a few tokens per second), so no
// call has a deadline of its own: go test's -timeout bounds the run.
func checkReal(t *testing.T, c *Client, wantProbs bool, text string) {
	t.Helper()
	for _, task := range []Task{TaskSafety, TaskInjection, TaskDrift, TaskToolCall} {
		res, err := c.Check(t.Context(), task, BuildPrompt(task, "", text))
		if err != nil {
			t.Fatalf("%s: %v", task, err)
		}
		v := res.Verdict
		if v.Verdict != validator.Pass && v.Verdict != validator.Fail {
			t.Fatalf("%s: verdict %q", task, v.Verdict)
		}
		if res.HasProbs != wantProbs {
			t.Errorf("%s: HasProbs %v, want %v", task, res.HasProbs, wantProbs)
		}
		if res.HasProbs && (res.PFail < 0 || res.PFail > 1 || (v.Verdict == validator.Fail) != (res.PFail >= 0.5) && !res.Approx) {
			// At temperature 0 the grammar picks the likelier of the two, so
			// the label and P(fail) agree unless P(fail) was bounded.
			t.Errorf("%s: verdict %s with p_fail %.3f", task, v.Verdict, res.PFail)
		}
		t.Logf("%s %s: %s risk %s p_fail %.3f (probs %v approx %v) prompt %d cached %d predicted %d in %s",
			c.Kind, task, v.Verdict, v.Risk, res.PFail, res.HasProbs, res.Approx, res.PromptTokens, res.CachedTokens, res.Predicted, res.Elapsed.Round(time.Millisecond))
	}
}

func TestLlamaCPU(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	checkReal(t, &Client{BaseURL: env.LlamaCPUURL, Slot: 3}, true, story)
}

func TestLlamaVulkan(t *testing.T) {
	env := testbed.Require(t, "llama-vulkan")
	// Vulkan0 is llvmpipe (software): keep the text short.
	checkReal(t, &Client{BaseURL: env.LlamaVulkanURL, Slot: 1}, true, "Lily saw a big red ball.")
}

func TestOllama(t *testing.T) {
	env := testbed.Require(t, "ollama")
	checkReal(t, &Client{BaseURL: env.OllamaURL, Kind: KindOllama, Model: env.OllamaModel}, false, story)
}

// TestValidatorEndToEnd streams a story through guard_llm against the
// real CPU llama-server and waits for the final verdict.
func TestValidatorEndToEnd(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	slot := 3
	g, err := New(Config{URL: env.LlamaCPUURL, CadenceTokens: 8, Deadline: 20 * time.Second, IDSlot: &slot}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(story); i += 3 {
		g.Write([]byte(story[i:min(i+3, len(story))]))
		time.Sleep(time.Millisecond)
	}
	g.Close()
	waitDone(t, g)
	g.Wait()
	fs := g.Findings()
	for _, f := range fs {
		if f.Reason == validator.ReasonGuardUnavailable {
			t.Fatalf("guard unavailable against a live server: %+v", f)
		}
	}
	if len(fs) == 0 && g.Settled() != len(story) {
		t.Fatalf("passed but settled %d of %d", g.Settled(), len(story))
	}
	t.Logf("findings %+v settled %d/%d", fs, g.Settled(), len(story))
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startLlama starts a private llama-server child on a free loopback port
// and returns its URL and process; it is killed at cleanup.
func startLlama(t *testing.T, env *testbed.Env) (string, *exec.Cmd) {
	t.Helper()
	return startLlamaModel(t, env, env.Model, false)
}

// startLlamaModel starts a private llama-server on model, on the CPU or
// on Vulkan0; it is killed at cleanup.
func startLlamaModel(t testing.TB, env *testbed.Env, model string, vulkan bool) (string, *exec.Cmd) {
	t.Helper()
	bin := env.LlamaServer
	if bin == "" {
		bin = "/var/cache/aegis-testbed/bin/llama-server"
	}
	if _, err := os.Stat(bin); err != nil {
		if testbed.Mandatory() {
			t.Fatalf("llama-server binary: %v", err)
		}
		t.Skipf("llama-server binary: %v", err)
	}
	port := freePort(t)
	// A guard server judges whole conversations: an assistant message last
	// is the judged answer, not a prefill to continue.
	args := []string{"-m", model, "--host", "127.0.0.1", "--port", fmt.Sprint(port), "-c", "4096", "-np", "1", "-t", "1",
		"--no-webui", "--no-prefill-assistant"}
	cmd := exec.Command(bin, append(args, "-dev", "none")...)
	cmd.Env = append(os.Environ(), "GGML_VK_VISIBLE_DEVICES=")
	if vulkan {
		cmd = exec.Command(bin, append(args, "-dev", "Vulkan0", "-ngl", "99")...)
		cmd.Env = append(os.Environ(), "GGML_VK_VISIBLE_DEVICES=0")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, cmd
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("private llama-server on %s not healthy after 60s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKilledGuardServer kills a private guard server mid-stream: the final
// verdict must follow fail-open / fail-closed. The deadline is far past any
// verdict's time on a loaded machine, so the live server's first verdict
// is never mistaken for an outage; the killed server's calls fail on
// their own, not by the deadline.
func TestKilledGuardServer(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	for _, open := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail_open=%v", open), func(t *testing.T) {
			url, cmd := startLlama(t, env)
			deadline := time.Minute
			g, err := New(Config{URL: url, CadenceTokens: 4, Deadline: deadline, FailOpen: open}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			half := len(story) / 2
			g.Write([]byte(story[:half]))
			// Let the first real verdict come back.
			waitFor(g, func() bool { return g.Settled() > 0 || len(g.Findings()) > 0 })
			if len(g.Findings()) > 0 {
				t.Fatalf("live server gave findings: %+v", g.Findings())
			}
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			g.Write([]byte(story[half:]))
			closedAt := time.Now()
			g.Close()
			waitDone(t, g)
			took := time.Since(closedAt)
			g.Wait()
			// How soon after the deadline the verdict came is a wall-clock
			// figure (TestValidatorDeadline checks the deadline with a fake
			// clock); on a loaded machine it is logged, not asserted.
			t.Logf("final verdict %s after Close, deadline %s", took, deadline)
			fs := g.Findings()
			if open {
				// Let go unjudged, and the verdict says so.
				if len(fs) != 1 || fs[0].Reason != validator.ReasonGuardUnavailable || g.Settled() != len(story) {
					t.Errorf("fail open: findings %+v, settled %d of %d", fs, g.Settled(), len(story))
				}
			} else if len(fs) != 1 || fs[0].Reason != validator.ReasonGuardUnavailable || !strings.Contains(fs[0].Message, "guard model") {
				t.Errorf("fail closed: findings %+v", fs)
			}
			t.Logf("killed server: outcome after %s", took.Round(time.Millisecond))
		})
	}
}
