package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

// LlamaBenchResult is one row of llama-bench -o json. Unknown fields are
// ignored: the schema grows between builds.
type LlamaBenchResult struct {
	BuildCommit string    `json:"build_commit"`
	BuildNumber int       `json:"build_number"`
	NPrompt     int       `json:"n_prompt"`
	NGen        int       `json:"n_gen"`
	NThreads    int       `json:"n_threads"`
	NBatch      int       `json:"n_batch"`
	NUBatch     int       `json:"n_ubatch"`
	NGPULayers  int       `json:"n_gpu_layers"`
	AvgTS       float64   `json:"avg_ts"`
	StddevTS    float64   `json:"stddev_ts"`
	SamplesTS   []float64 `json:"samples_ts"`
}

// BestTS is the fastest repetition (avg_ts when samples are missing).
func (r LlamaBenchResult) BestTS() float64 {
	best := 0.0
	for _, v := range r.SamplesTS {
		best = max(best, v)
	}
	if best == 0 {
		return r.AvgTS
	}
	return best
}

// Test names the row as llama-bench prints it: pp512, tg16.
func (r LlamaBenchResult) Test() string {
	if r.NGen == 0 {
		return "pp" + strconv.Itoa(r.NPrompt)
	}
	if r.NPrompt == 0 {
		return "tg" + strconv.Itoa(r.NGen)
	}
	return fmt.Sprintf("pp%d+tg%d", r.NPrompt, r.NGen)
}

// ParseLlamaBenchJSON parses llama-bench -o json output. Log lines
// before the JSON array (some builds print them to stdout) are skipped.
func ParseLlamaBenchJSON(b []byte) ([]LlamaBenchResult, error) {
	i := bytes.IndexByte(b, '[')
	if i < 0 {
		return nil, fmt.Errorf("bench: llama-bench output has no JSON array")
	}
	var rows []LlamaBenchResult
	if err := json.Unmarshal(b[i:], &rows); err != nil {
		return nil, fmt.Errorf("bench: llama-bench JSON: %w", err)
	}
	return rows, nil
}

// runLlamaBench runs llama-bench for one device with the settings the
// server measurement uses: same threads, default batch (2048/512) and
// flash attention (auto), the same -p and -n sizes, all layers on the
// device. Its tg tests decode from an empty context, as the server's
// one-token-prompt requests do.
func runLlamaBench(ctx context.Context, binary, model string, dev devices.Device, threads, reps int, pp, tg []int) ([]LlamaBenchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if len(pp) == 0 {
		pp = []int{0} // llama-bench's "no prefill test"
	}
	args := []string{"-m", model, "-p", joinInts(pp), "-n", joinInts(tg), "-r", strconv.Itoa(reps), "-o", "json"}
	if threads > 0 {
		args = append(args, "-t", strconv.Itoa(threads))
	}
	if dev.IsCPU() {
		args = append(args, "-dev", "none", "-ngl", "0")
	} else {
		args = append(args, "-dev", dev.Name, "-ngl", "99")
	}
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), dev.Env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		tail := errb.String()
		if len(tail) > 300 {
			tail = tail[len(tail)-300:]
		}
		return nil, fmt.Errorf("bench: %s %s: %w: %s", binary, strings.Join(args, " "), err, tail)
	}
	return ParseLlamaBenchJSON(out.Bytes())
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
