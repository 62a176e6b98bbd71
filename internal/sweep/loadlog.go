package sweep

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
)

// LoadLog is the memory llama-server reports while loading a model, in
// bytes, summed per kind over buffer types (CPU_Mapped, CUDA0, Vulkan0...).
type LoadLog struct {
	ModelBytes   uint64            `json:"model_bytes"`
	KVBytes      uint64            `json:"kv_bytes"`
	ComputeBytes uint64            `json:"compute_bytes"`
	Model        map[string]uint64 `json:"model_by_buffer,omitempty"`
	KV           map[string]uint64 `json:"kv_by_buffer,omitempty"`
	Compute      map[string]uint64 `json:"compute_by_buffer,omitempty"`
}

// Total is model + KV + compute.
func (l LoadLog) Total() uint64 { return l.ModelBytes + l.KVBytes + l.ComputeBytes }

// Lines of llama.cpp's load log (llama-model.cpp load_tensors,
// llama-kv-cache.cpp, llama-context.cpp sched_reserve), e.g.
//
//	load_tensors:   CPU_Mapped model buffer size =     1.12 MiB
//	llama_kv_cache:        CPU KV buffer size =     1.25 MiB
//	sched_reserve:        CPU compute buffer size =     3.65 MiB
var (
	modelRe   = regexp.MustCompile(`\s(\S+) model buffer size\s*=\s*([0-9]+(?:\.[0-9]+)?) MiB`)
	kvRe      = regexp.MustCompile(`\s(\S+) KV buffer size\s*=\s*([0-9]+(?:\.[0-9]+)?) MiB`)
	computeRe = regexp.MustCompile(`\s(\S+) compute buffer size\s*=\s*([0-9]+(?:\.[0-9]+)?) MiB`)
)

// maxLogLine bounds one log line; longer lines are skipped.
const maxLogLine = 64 << 10

// ParseLoadLog reads a llama-server log and sums the buffers it reports.
// The figures are rounded by llama.cpp to 0.01 MiB.
func ParseLoadLog(r io.Reader) LoadLog {
	l := LoadLog{Model: map[string]uint64{}, KV: map[string]uint64{}, Compute: map[string]uint64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLogLine)
	for {
		if !sc.Scan() {
			if sc.Err() == bufio.ErrTooLong {
				sc = bufio.NewScanner(r) // skip the rest of an overlong line and go on
				sc.Buffer(make([]byte, 0, 4096), maxLogLine)
				continue
			}
			break
		}
		line := sc.Text()
		for _, k := range []struct {
			re  *regexp.Regexp
			m   map[string]uint64
			sum *uint64
		}{{modelRe, l.Model, &l.ModelBytes}, {kvRe, l.KV, &l.KVBytes}, {computeRe, l.Compute, &l.ComputeBytes}} {
			if m := k.re.FindStringSubmatch(line); m != nil {
				mib, err := strconv.ParseFloat(m[2], 64)
				if err != nil || mib > 1<<30 {
					continue
				}
				b := uint64(mib * (1 << 20))
				k.m[m[1]] += b
				*k.sum += b
			}
		}
	}
	return l
}
