// Package browsertest drives Debian's headless Chromium through the Chrome
// DevTools protocol (chromedp) for end-to-end tests of the dashboard: it
// starts a browser with a fresh profile and no background networking,
// waits on JavaScript predicates and saves screenshots as CI artifacts.
//
// Chromium comes from `scripts/testbed install` (install_chromium). When it
// is missing, tests fail where integration tests are mandatory (CI) and
// skip elsewhere.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// ExecPath finds Chromium: $AEGIS_CHROMIUM, else /usr/bin/chromium, else
// chromium or chromium-browser on PATH.
func ExecPath() (string, error) {
	if p := os.Getenv("AEGIS_CHROMIUM"); p != "" {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium", nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chromium not found (scripts/testbed install with CI=true or AEGIS_TESTBED_CHROMIUM=1 installs it)")
}

// Flags are the command-line flags Chromium runs with: headless, no
// sandbox (tests run as root in CI), no GPU, and nothing that would reach
// out to the network on its own.
var Flags = []chromedp.ExecAllocatorOption{
	chromedp.Flag("headless", true),
	chromedp.Flag("no-sandbox", true),
	chromedp.Flag("disable-gpu", true),
	chromedp.Flag("disable-background-networking", true),
	chromedp.Flag("disable-component-update", true),
	chromedp.Flag("no-first-run", true),
	chromedp.Flag("disable-sync", true),
	chromedp.Flag("disable-quic", true),
	chromedp.Flag("no-default-browser-check", true),
	chromedp.Flag("disable-extensions", true),
	chromedp.Flag("disable-dev-shm-usage", true),
	chromedp.Flag("hide-scrollbars", true),
	chromedp.Flag("mute-audio", true),
	chromedp.Flag("password-store", "basic"),
}

// New starts Chromium with a fresh --user-data-dir and returns a tab
// context. The browser is stopped when the test ends.
func New(t testing.TB, width, height int) context.Context {
	t.Helper()
	path, err := ExecPath()
	if err != nil {
		if testbed.Mandatory() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	opts := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	}, Flags...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// Start the browser now, so a launch failure is reported as such. The
	// first action must run on ctx itself: chromedp ties the browser's
	// lifetime to the context of that first action.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// Navigate loads url in the tab.
func Navigate(t testing.TB, ctx context.Context, url string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(c, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate %s: %v", url, err)
	}
}

// minWait is the least time Wait gives a page: a browser on a loaded
// machine may take seconds to apply what it was sent, and a wait's bound
// is there to end a hang, never to judge speed.
const minWait = time.Minute

// Wait polls the JavaScript expression until it is truthy and returns
// its value, or fails the test after timeout (at least minWait) with what
// describe (another expression) says about the page.
func Wait[T any](t testing.TB, ctx context.Context, expr string, timeout time.Duration, describe string) T {
	t.Helper()
	deadline := time.Now().Add(max(timeout, minWait))
	for {
		left := time.Until(deadline)
		c, cancel := context.WithTimeout(ctx, left+5*time.Second)
		v, err := chromedp.Run(c, chromedp.Poll[T](expr, chromedp.WithPollingTimeout(left), chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return v
		}
		// A page that just loaded may swap its JavaScript context under
		// the poll; that is not the answer, so ask again.
		if strings.Contains(err.Error(), "Cannot find context") && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		state := ""
		if describe != "" {
			d, cancelD := context.WithTimeout(ctx, 5*time.Second)
			state, _ = chromedp.Run(d, chromedp.Evaluate[string](describe))
			cancelD()
		}
		t.Fatalf("waiting for %s: %v\npage state: %s", expr, err, state)
		var zero T
		return zero
	}
}

// Screenshot saves a full-page PNG as artifacts/name at the repository
// root (a CI artifact path; /artifacts/ is git-ignored) and returns the
// absolute path.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "artifacts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
	return path
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("browsertest: no go.mod above the working directory")
		}
		dir = parent
	}
}
