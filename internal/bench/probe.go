package bench

import (
	"github.com/aegis-sentinel/aegis/internal/devices"

	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuTimes is the first line of /proc/stat: busy and total jiffies.
type cpuTimes struct{ busy, total uint64 }

func readCPUTimes(root string) (cpuTimes, bool) {
	b, err := os.ReadFile(filepath.Join(root, "proc", "stat"))
	if err != nil {
		return cpuTimes{}, false
	}
	return parseProcStat(string(b))
}

// parseProcStat reads the aggregate "cpu" line: user nice system idle
// iowait irq softirq steal ...; idle and iowait are not busy.
func parseProcStat(s string) (cpuTimes, bool) {
	line, _, _ := strings.Cut(s, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTimes{}, false
	}
	var t cpuTimes
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		if i >= 8 { // guest and guest_nice are already in user
			break
		}
		t.total += n
		if i != 3 && i != 4 {
			t.busy += n
		}
	}
	return t, true
}

// procCPU returns utime+stime of a process in clock ticks.
func procCPU(root string, pid int) (uint64, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(root, "proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	return parsePidStat(string(b))
}

// parsePidStat reads fields 14 and 15 (utime, stime) of /proc/PID/stat;
// the command name in parentheses may hold spaces.
func parsePidStat(s string) (uint64, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14 → f[11].
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return u + st, true
}

// clkTck is USER_HZ, 100 on every Linux architecture Go supports.
const clkTck = 100

// loadSampler measures machine CPU load and one process's CPU time over
// an interval.
type loadSampler struct {
	root  string
	pid   int
	t0    cpuTimes
	p0    uint64
	okSys bool
	okPid bool
	start time.Time
}

func startLoad(root string, pid int) *loadSampler {
	s := &loadSampler{root: root, pid: pid, start: time.Now()}
	s.t0, s.okSys = readCPUTimes(root)
	s.p0, s.okPid = procCPU(root, pid)
	return s
}

// Load is CPU use during a measured interval.
type Load struct {
	// SystemPct is the machine's busy share over all CPUs, 0-100.
	SystemPct float64 `json:"system_pct"`
	// ServerCores is the guard server's own CPU time per second of wall
	// time (1.0 = one core busy); -1 when unknown (--url mode).
	ServerCores float64 `json:"server_cores"`
}

func (s *loadSampler) stop() Load {
	l := Load{SystemPct: -1, ServerCores: -1}
	if t1, ok := readCPUTimes(s.root); ok && s.okSys && t1.total > s.t0.total {
		l.SystemPct = 100 * float64(t1.busy-s.t0.busy) / float64(t1.total-s.t0.total)
	}
	if p1, ok := procCPU(s.root, s.pid); ok && s.okPid {
		if wall := time.Since(s.start).Seconds(); wall > 0 {
			l.ServerCores = float64(p1-s.p0) / clkTck / wall
		}
	}
	return l
}

// Sources of Power.Source.
const (
	powerRAPL      = "rapl"       // the CPU packages' energy counters
	powerNvidiaSMI = "nvidia-smi" // one NVIDIA GPU's board power
	powerNone      = "n/a"
)

// Power is energy use during an interval, where the machine exposes it.
type Power struct {
	Source string  `json:"source"` // powerRAPL, powerNvidiaSMI or powerNone
	Watts  float64 `json:"watts,omitempty"`
	Joules float64 `json:"joules,omitempty"` // packages (RAPL) or board (nvidia-smi)
	// Domains holds RAPL joules per domain name: package-0, core,
	// uncore (the iGPU on client parts), dram.
	Domains map[string]float64 `json:"domains,omitempty"`
}

// raplDomains lists the RAPL domains with an energy counter: packages
// (intel-rapl:N) and their parts (intel-rapl:N:M: core, uncore, dram).
func raplDomains(root string) []string {
	m, _ := filepath.Glob(filepath.Join(root, "sys", "class", "powercap", "intel-rapl:*"))
	var out []string
	for _, d := range m {
		if _, err := os.Stat(filepath.Join(d, "energy_uj")); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// isPackage reports whether a RAPL domain is a whole package.
func isPackage(dir string) bool { return strings.Count(filepath.Base(dir), ":") == 1 }

func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// powerMeter reads the energy of the device a guard runs on: RAPL
// package energy (all packages) for the CPU and for devices that live in
// the CPU package (an iGPU), nvidia-smi board power of the one GPU for a
// CUDA device. A CPU guard is never charged a GPU's watts: with no RAPL it
// reports "n/a".
type powerMeter struct {
	root    string
	domains []string
	e0      []uint64
	start   time.Time
	nvidia  string
	gpu     int // nvidia-smi --id
	w0      float64
}

// lookNvidiaSMI finds nvidia-smi (tests replace it).
var lookNvidiaSMI = func() (string, error) { return exec.LookPath("nvidia-smi") }

func startPower(ctx context.Context, root string, d devices.Device) *powerMeter {
	p := &powerMeter{root: root, start: time.Now()}
	if d.Backend == devices.BackendCUDA {
		// CUDA0 is GPU 0 in nvidia-smi unless CUDA_VISIBLE_DEVICES
		// reorders them.
		idx, err := strconv.Atoi(strings.TrimLeft(d.Name, "CUDAcuda"))
		if path, lerr := lookNvidiaSMI(); err == nil && lerr == nil {
			p.nvidia, p.gpu = path, idx
			p.w0 = nvidiaWatts(ctx, path, idx)
		}
		return p
	}
	for _, dom := range raplDomains(root) {
		if e, ok := readUint(filepath.Join(dom, "energy_uj")); ok {
			p.domains = append(p.domains, dom)
			p.e0 = append(p.e0, e)
		}
	}
	return p
}

// nvidiaWatts is GPU gpu's board power draw now, or -1.
func nvidiaWatts(ctx context.Context, path string, gpu int) float64 {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--query-gpu=power.draw", "--format=csv,noheader,nounits", "--id="+strconv.Itoa(gpu)).Output()
	if err != nil {
		return -1
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil || v < 0 {
		return -1
	}
	return v
}

func (p *powerMeter) stop(ctx context.Context) Power {
	wall := time.Since(p.start).Seconds()
	if len(p.domains) > 0 && wall > 0 {
		var j float64
		doms := map[string]float64{}
		for i, d := range p.domains {
			e1, ok := readUint(filepath.Join(d, "energy_uj"))
			if !ok {
				return Power{Source: powerNone}
			}
			delta := e1 - p.e0[i]
			if e1 < p.e0[i] { // the counter wrapped
				if r, ok := readUint(filepath.Join(d, "max_energy_range_uj")); ok {
					delta = r - p.e0[i] + e1
				}
			}
			name, err := os.ReadFile(filepath.Join(d, "name"))
			key := strings.TrimSpace(string(name))
			if err != nil || key == "" {
				key = filepath.Base(d)
			}
			doms[key] += float64(delta) / 1e6
			if isPackage(d) {
				j += float64(delta) / 1e6
			}
		}
		return Power{Source: powerRAPL, Joules: j, Watts: j / wall, Domains: doms}
	}
	if p.nvidia != "" {
		w1 := nvidiaWatts(ctx, p.nvidia, p.gpu)
		if p.w0 >= 0 && w1 >= 0 {
			w := (p.w0 + w1) / 2
			return Power{Source: powerNvidiaSMI, Watts: w, Joules: w * wall}
		}
	}
	return Power{Source: powerNone}
}
