package devices

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// SMIFields are the nvidia-smi --query-gpu fields Discover asks for, in
// the order ParseSMI reads them.
var SMIFields = []string{"index", "pci.bus_id", "name", "memory.total", "memory.used", "driver_version", "compute_cap"}

// SMIArgs is the nvidia-smi command line (after the binary) whose output
// ParseSMI reads.
func SMIArgs() []string {
	return []string{"--query-gpu=" + strings.Join(SMIFields, ","), "--format=csv,noheader,nounits"}
}

// SMIGPU is one GPU as nvidia-smi reports it.
type SMIGPU struct {
	Index      int    `json:"index"`
	BusID      string `json:"bus_id"` // normalised to the sysfs form, 0000:00:06.0
	Name       string `json:"name"`
	MemTotal   int64  `json:"memory_total_mib"`
	MemUsed    int64  `json:"memory_used_mib"`
	Driver     string `json:"driver_version"`
	ComputeCap string `json:"compute_capability"`
}

// maxSMIOutput bounds what ParseSMI reads (a machine has at most a few
// dozen GPUs; a line is under 200 bytes).
const maxSMIOutput = 1 << 20

// ParseSMI parses the CSV nvidia-smi prints for SMIArgs. A header line
// (when --format=csv without noheader was used) is skipped; "[N/A]" or
// "[Not Supported]" fields are left empty or zero. A line with the wrong
// number of fields or a bad index is an error naming the line.
func ParseSMI(b []byte) ([]SMIGPU, error) {
	if len(b) > maxSMIOutput {
		return nil, fmt.Errorf("nvidia-smi output is %d bytes, limit %d", len(b), maxSMIOutput)
	}
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	var out []SMIGPU
	for line := 1; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi output: %w", err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if strings.TrimSpace(rec[0]) == "index" {
			continue // a header
		}
		if len(rec) != len(SMIFields) {
			return nil, fmt.Errorf("nvidia-smi output line %d: %d fields, want %d (%s)", line, len(rec), len(SMIFields), strings.Join(SMIFields, ","))
		}
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
			if strings.HasPrefix(rec[i], "[") { // [N/A], [Not Supported]
				rec[i] = ""
			}
		}
		idx, err := strconv.Atoi(rec[0])
		if err != nil || idx < 0 {
			return nil, fmt.Errorf("nvidia-smi output line %d: index %q is not a GPU index", line, rec[0])
		}
		g := SMIGPU{Index: idx, BusID: normBusID(rec[1]), Name: rec[2], Driver: rec[5], ComputeCap: rec[6]}
		g.MemTotal = mib(rec[3])
		g.MemUsed = mib(rec[4])
		out = append(out, g)
	}
	return out, nil
}

// mib reads a memory field in MiB ("143771" with nounits, "143771 MiB"
// without); anything else is 0.
func mib(s string) int64 {
	s = strings.TrimSpace(strings.TrimSuffix(s, "MiB"))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// normBusID turns nvidia-smi's bus id (00000000:00:06.0, domain in eight
// digits, upper case) into the sysfs form (0000:00:06.0).
func normBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	dom, rest, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	n, err := strconv.ParseUint(dom, 16, 32)
	if err != nil {
		return s
	}
	return fmt.Sprintf("%04x:%s", n, rest)
}

// QuerySMI runs nvidia-smi with SMIArgs and parses its output.
func QuerySMI(ctx context.Context, binary string, timeout time.Duration) ([]SMIGPU, error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, SMIArgs()...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String() + " " + out.String())
		if len(msg) > 300 {
			msg = msg[:300]
		}
		return nil, fmt.Errorf("%s: %w: %s", binary, err, msg)
	}
	return ParseSMI(out.Bytes())
}

// applySMI attaches what nvidia-smi reports to the PCI GPU at the same
// bus address: the marketing name, memory, driver and compute capability,
// and a class from the name when the PCI id is not in the table.
func applySMI(gpus []GPU, smi []SMIGPU) {
	for _, s := range smi {
		for i := range gpus {
			g := &gpus[i]
			if g.Address != s.BusID {
				continue
			}
			idx := s.Index
			g.SMIIndex = &idx
			if s.Name != "" {
				g.Name, g.NameSource = s.Name, "nvidia-smi"
			}
			g.VRAM, g.VRAMUsed = s.MemTotal, s.MemUsed
			g.DriverVersion, g.ComputeCap = s.Driver, s.ComputeCap
			if g.Class.Label == ClassNVIDIA || g.Class.Label == ClassUnknownDGPU {
				if l := classifyDescription(s.Name); l != ClassUnknown {
					g.Class = ClassByLabel(l)
				}
			}
		}
	}
}
