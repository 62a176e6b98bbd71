package faulttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/gateway"
)

// readBig reads a stream of bigPiece chunks without keeping it, and
// returns how many bytes of content it carried, whether that content was
// bigPiece repeated (no byte lost or doubled), and the error event.
func readBig(t *testing.T, resp *http.Response) (n int, intact bool, code, msg string) {
	t.Helper()
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	intact = true
	for sc.Scan() {
		p, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok || string(p) == "[DONE]" {
			continue
		}
		var m struct {
			Choices []struct{ Delta struct{ Content string } }
			Error   *struct{ Code, Message string }
		}
		if err := json.Unmarshal(p, &m); err != nil {
			t.Fatalf("not JSON: %.200q", p)
		}
		if m.Error != nil {
			code, msg = m.Error.Code, m.Error.Message
		}
		for _, c := range m.Choices {
			s := c.Delta.Content
			for len(s) > 0 {
				off := n % len(bigPiece)
				k := min(len(s), len(bigPiece)-off)
				if s[:k] != bigPiece[off:off+k] {
					intact = false
				}
				n += k
				s = s[k:]
			}
		}
	}
	return n, intact, code, msg
}

// TestSlowClientMemory: a client that reads nothing for a while during a
// 40 MB answer costs bounded memory: the upstream is held back by TCP
// back-pressure, and the answer is cut at max_response_bytes with a clear
// error. The bytes the client then reads are the upstream's, in order.
func TestSlowClientMemory(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		f := newFake(t, bigAnswer(40<<20))
		// The stall gap is long here: this case is about memory.
		r := newRig(t, f, "checks: {stall: {ttft: 30s, gap: 30s}, repetition: false}\n", nil)
		base := resetPeakRSS(t)
		resp := r.post(ask, true)
		time.Sleep(3 * time.Second) // the fault itself: the client reads nothing (no deadline is near)
		n, intact, code, msg := readBig(t, resp)
		peak := peakRSS(t)
		t.Logf("peak RSS %d MB above a baseline of %d MB (race detector: %v); client got %d bytes", (peak-base)>>20, base>>20, raceOn, n)
		if code != "aegis_length_exceeded" || !strings.Contains(msg, "max_response_bytes") {
			t.Fatalf("got %q %q; want the response cap's error", code, msg)
		}
		if !intact || n == 0 || n > gateway.DefaultMaxResponseBytes {
			t.Fatalf("the client's %d bytes are not the upstream's text (intact %v)", n, intact)
		}
		if limit := rssLimit(); peak-base > limit {
			t.Fatalf("peak RSS %d MB above the baseline; want < %d MB", (peak-base)>>20, limit>>20)
		}
	})
}

// resetPeakRSS resets the process's peak RSS (VmHWM) and returns the
// current RSS.
func resetPeakRSS(t *testing.T) uint64 {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	return procStatus(t, "VmRSS")
}

func peakRSS(t *testing.T) uint64 { return procStatus(t, "VmHWM") }

func procStatus(t *testing.T, key string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", key)
	return 0
}

// TestSlowClientIsNotAStall: a client that reads nothing for ten times
// the stall gap, while the gateway has far more to write than the socket
// buffers hold, is not an upstream stall: the upstream is asked once,
// and the client then reads the upstream's text in order.
func TestSlowClientIsNotAStall(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		f := newFake(t, bigAnswer(40<<20))
		// A 1 s gap: short against the pause, long against what a loaded
		// 2-core machine can stall the in-process upstream for.
		r := newRig(t, f, "checks: {stall: {ttft: 5s, gap: 1s}, repetition: false}\n",
			func(g *gateway.Gateway) { g.MaxResponseBytes = 32 << 20 })
		resp := r.post(ask, true)
		time.Sleep(10 * time.Second) // the fault itself: the client reads nothing for ten gaps
		n, intact, code, msg := readBig(t, resp)
		if p := f.posts.Load(); p != 1 {
			t.Fatalf("the upstream got %d POSTs: the client's pause was taken for a stall (%s %s)", p, code, msg)
		}
		if code != "aegis_length_exceeded" || !intact || n == 0 {
			t.Fatalf("got %d bytes (intact %v), %q %q", n, intact, code, msg)
		}
	})
}

// rssLimit is the bound on the extra resident memory of a 40 MB answer to
// a client that reads nothing: 64 MB, and 96 MB under the race detector,
// whose shadow memory adds to every allocation.
func rssLimit() uint64 {
	if raceOn {
		return 96 << 20
	}
	return 64 << 20
}
