package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aegis-sentinel/aegis/internal/devices"
	"github.com/aegis-sentinel/aegis/internal/supervisor"
)

// AutoOptions configure AutoPlace.
type AutoOptions struct {
	Binary  string
	Model   string
	Devices []devices.Device // candidates; the CPU is added when missing
	Threads int              // default: devices.GuardThreads of the physical cores
	// CacheFile holds cached placements; "" means
	// $XDG_CACHE_HOME/aegis/placement.json (~/.cache when unset).
	CacheFile string
	NoCache   bool // measure and do not read or write the cache
	Refresh   bool // measure even when cached, then write
	Samples   int  // verdicts per device; default 3
}

// Candidate is one device's short measurement.
type Candidate struct {
	Device         string   `json:"device"`
	Env            []string `json:"env,omitempty"`
	VerdictMS      float64  `json:"verdict_ms"`
	TGTokS         float64  `json:"tg16_tok_s"`
	CPUBusyPct     float64  `json:"cpu_busy_pct"` // machine CPU load while answering (-1 unknown)
	Ratio          float64  `json:"ratio"`
	Interpretation string   `json:"interpretation"`
	Error          string   `json:"error,omitempty"`
	// TimedOut says the device gave no verdict within VerdictTimeout;
	// VerdictMS is then that bound, a lower bound on its time to verdict.
	TimedOut bool `json:"timed_out,omitempty"`
}

// VerdictTimeout bounds one verdict while placing: a device that needs
// longer is slower than any CPU worth comparing it with, and is judged
// on this bound instead of failing the measurement.
const VerdictTimeout = time.Minute

// Placement is AutoPlace's answer: the device the guard should run on.
type Placement struct {
	Device     string      `json:"device"` // "CPU" or a llama.cpp device name
	Env        []string    `json:"env,omitempty"`
	Ratio      float64     `json:"ratio"`
	Reason     string      `json:"reason"`
	Candidates []Candidate `json:"candidates"`
	Key        string      `json:"key"`
	Version    string      `json:"server_version"`
	Measured   time.Time   `json:"measured"`
	Cached     bool        `json:"-"`
}

// Chosen returns the device the placement chose, with its environment.
func (p *Placement) Chosen() devices.Device {
	if p.Device == "CPU" {
		return devices.Named("none")
	}
	d := devices.Named(p.Device)
	d.Env = p.Env
	return d
}

// AutoPlace decides where the guard model runs: a short version of the
// sentinel benchmark (time to verdict and tg16 per device, from fresh
// server starts), cached on disk keyed by the model's hash, the device
// list and the llama-server version, so `aegis serve --guard-device auto`
// pays for it once.
func AutoPlace(ctx context.Context, o AutoOptions) (*Placement, error) {
	if o.Binary == "" || o.Model == "" {
		return nil, errors.New("bench: AutoPlace needs a llama-server binary and a model")
	}
	version := ServerVersion(ctx, o.Binary)
	key, err := placementKey(o.Model, o.Devices, version)
	if err != nil {
		return nil, err
	}
	path := o.CacheFile
	if path == "" {
		path, err = DefaultCacheFile()
		if err != nil && !o.NoCache {
			return nil, err
		}
	}
	if !o.NoCache && !o.Refresh {
		if p, ok := readCache(path, key); ok {
			p.Cached = true
			return p, nil
		}
	}
	p, err := measurePlacement(ctx, o)
	if err != nil {
		return nil, err
	}
	p.Key, p.Version, p.Measured = key, version, time.Now().UTC()
	if !o.NoCache {
		if err := writeCache(path, key, p); err != nil {
			return p, err
		}
	}
	return p, nil
}

// measurePlacement measures each candidate from a fresh start and
// applies the interpretation table.
func measurePlacement(ctx context.Context, o AutoOptions) (*Placement, error) {
	if o.Threads <= 0 {
		o.Threads = devices.GuardThreads(PhysicalCores())
	}
	if o.Samples <= 0 {
		o.Samples = 3
	}
	devs := o.Devices
	hasCPU := false
	for _, d := range devs {
		hasCPU = hasCPU || d.IsCPU()
	}
	if !hasCPU {
		devs = append([]devices.Device{{Name: "none"}}, devs...)
	}
	var cands []Candidate
	for _, d := range devs {
		c := measureCandidate(ctx, o, d)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		cands = append(cands, c)
	}
	return place(cands)
}

// place applies the interpretation table to measured candidates.
func place(cands []Candidate) (*Placement, error) {
	var cpu *Candidate
	for i := range cands {
		if cands[i].Device == "CPU" {
			cpu = &cands[i]
		}
	}
	if cpu == nil {
		return nil, errors.New("bench: CPU baseline missing")
	}
	if cpu.Error != "" {
		return nil, fmt.Errorf("bench: CPU baseline failed: %s", cpu.Error)
	}
	p := &Placement{Device: "CPU", Ratio: 1, Candidates: cands,
		Reason: "no device beats the CPU by the table's margin (>= 1.2x time to verdict)"}
	for i := range cands {
		c := &cands[i]
		if c.Device == "CPU" {
			c.Ratio, c.Interpretation = 1, VerdictBaseline
			continue
		}
		if c.Error != "" && !c.TimedOut {
			c.Interpretation = "error"
			continue
		}
		c.Ratio = cpu.VerdictMS / c.VerdictMS
		c.Interpretation = Interpret(c.Ratio, false)
		switch c.Interpretation {
		case VerdictPlausible, VerdictUseful, VerdictStrong:
			if c.Ratio > p.Ratio {
				p.Device, p.Env, p.Ratio = c.Device, c.Env, c.Ratio
				p.Reason = fmt.Sprintf("%s answers verdicts %.2fx as fast as the CPU (%s)", c.Device, c.Ratio, c.Interpretation)
			}
		case VerdictEqual:
			// About equal only counts when it frees the CPU.
			if p.Device == "CPU" && cpu.CPUBusyPct >= 0 && c.CPUBusyPct >= 0 && c.CPUBusyPct < cpu.CPUBusyPct-20 {
				p.Device, p.Env, p.Ratio = c.Device, c.Env, c.Ratio
				p.Reason = fmt.Sprintf("%s is about as fast as the CPU (%.2fx) and leaves it freer (%.0f%% vs %.0f%% busy)", c.Device, c.Ratio, c.CPUBusyPct, cpu.CPUBusyPct)
			}
		}
	}
	return p, nil
}

func measureCandidate(ctx context.Context, o AutoOptions, d devices.Device) Candidate {
	c := Candidate{Device: d.Label(), Env: d.Env}
	sup := supervisor.New(supervisor.Config{
		Name: "autoplace-" + d.Label(), Binary: o.Binary, Model: o.Model, Chain: []devices.Device{d},
		NoCPUFallback: true, MaxRestarts: -1, CtxSize: 1024, Threads: o.Threads, StartTimeout: time.Minute,
	})
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = sup.Stop(sctx)
	}()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := sup.Start(sctx); err != nil {
		c.Error = err.Error()
		return c
	}
	srv := server{c: sup.HTTPClient(VerdictTimeout), proto: guardProtocol(o.Model, "")}
	fail := func(err error) {
		c.Error = err.Error()
		if isTimeout(err) && sctx.Err() == nil {
			c.TimedOut, c.VerdictMS = true, float64(VerdictTimeout.Milliseconds())
		}
	}
	if _, _, err := srv.verdict(sctx, 0); err != nil { // warm-up
		fail(err)
		return c
	}
	var ms, tg []float64
	c.CPUBusyPct = -1
	st, _ := sup.Status()
	ls := startLoad("/", st.PIDs[0])
	for i := range o.Samples {
		dur, _, err := srv.verdict(sctx, i+1)
		if err != nil {
			fail(err)
			return c
		}
		ms = append(ms, float64(dur.Microseconds())/1000)
		t, err := srv.generate(sctx, 1, 16)
		if err != nil {
			c.Error = err.Error()
			return c
		}
		tg = append(tg, t.PredictedPerSecond)
	}
	c.CPUBusyPct = ls.stop().SystemPct
	c.VerdictMS, c.TGTokS = summarize(ms).Median, summarize(tg).Median
	return c
}

// isTimeout reports whether err is a client's time limit running out (as
// opposed to a refused connection, a crash or a bad answer).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// DefaultCacheFile is $XDG_CACHE_HOME/aegis/placement.json.
func DefaultCacheFile() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("bench: no cache directory: %w", err)
	}
	return filepath.Join(dir, "aegis", "placement.json"), nil
}

// placementKey hashes what a placement depends on: the model (its size
// and its first and last 8 MiB, so multi-GB files hash fast), the
// candidate devices with their environment, and the server version.
func placementKey(model string, devs []devices.Device, version string) (string, error) {
	f, err := os.Open(model)
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "size %d\n", fi.Size())
	const chunk = 8 << 20
	if _, err := io.CopyN(h, f, chunk); err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("bench: hashing %s: %w", model, err)
	}
	if fi.Size() > 2*chunk {
		if _, err := io.Copy(h, io.NewSectionReader(f, fi.Size()-chunk, chunk)); err != nil {
			return "", fmt.Errorf("bench: hashing %s: %w", model, err)
		}
	}
	for _, d := range devs {
		fmt.Fprintf(h, "dev %s %s\n", d.Label(), strings.Join(d.Env, " "))
	}
	fmt.Fprintf(h, "server %s\n", version)
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

type cacheFile struct {
	Placements map[string]*Placement `json:"placements"`
}

func readCache(path, key string) (*Placement, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	var c cacheFile
	if json.Unmarshal(b, &c) != nil {
		return nil, false
	}
	p, ok := c.Placements[key]
	return p, ok && p != nil
}

// writeCache adds p under key, atomically (write + rename).
func writeCache(path, key string, p *Placement) error {
	var c cacheFile
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &c)
	}
	if c.Placements == nil {
		c.Placements = map[string]*Placement{}
	}
	c.Placements[key] = p
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bench: placement cache: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("bench: placement cache: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("bench: placement cache: %w", err)
	}
	return nil
}
