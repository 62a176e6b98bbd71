package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

func init() {
	register(func(stdio *IO) *cobra.Command {
		var (
			asJSON  bool
			server  string
			envs    []string
			timeout time.Duration
		)
		c := &cobra.Command{
			Use:   "devices",
			Short: "List compute devices and how suitable each is for a guard model",
			Long: `devices lists the CPU, the GPUs found in sysfs (PCI ids, integrated or
discrete) and the devices llama-server can use (the names to pass to -dev), from
--llama-server or the llama-server on PATH. Each device is classified against the hardware table: what to
expect from it as the home of a small guard model and which backends apply.
The class is a hint; 'aegis bench sentinel' measures.`,
			Args: noArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				for _, e := range envs {
					if !strings.Contains(e, "=") {
						return usagef("--env wants KEY=VALUE, got %q", e)
					}
				}
				if server != "" {
					// A binary named on the command line must exist: a
					// report without its devices would look like a machine
					// that has none.
					p, err := exec.LookPath(server)
					if err != nil {
						return usagef("--llama-server %s: %v", server, lookPathCause(err))
					}
					server = p
				} else {
					// llama-server's own devices (-dev names) come from the
					// binary: use the one on PATH, and say so when there is none.
					if p, err := exec.LookPath("llama-server"); err == nil {
						server = p
					} else {
						fmt.Fprintln(stdio.Err, "aegis: llama-server is not on PATH, so the devices it can use (the -dev names such as "+
							"Vulkan0 or CUDA0) are not listed; pass --llama-server PATH to list them")
					}
				}
				r, err := devices.Discover(c.Context(), devices.Options{LlamaServer: server, Env: envs, Timeout: timeout})
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(stdio.Out)
					enc.SetIndent("", "  ")
					return enc.Encode(r)
				}
				printDevices(stdio, r)
				return nil
			},
		}
		c.Flags().BoolVar(&asJSON, "json", false, "write the report as JSON")
		c.Flags().StringVar(&server, "llama-server", "", "llama-server binary whose devices to list with --list-devices (default: llama-server on PATH)")
		c.Flags().StringArrayVar(&envs, "env", nil, "KEY=VALUE added to llama-server's environment (e.g. GGML_VK_VISIBLE_DEVICES=0); repeatable")
		c.Flags().DurationVar(&timeout, "timeout", 20*time.Second, "time limit for llama-server --list-devices")
		return c
	})
}

func printDevices(stdio *IO, r *devices.Report) {
	w := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	c := r.CPU
	fmt.Fprintf(w, "CPU\t%s\n", c.Model)
	fmt.Fprintf(w, "\t%d cores, %d threads, %d MiB memory (%d MiB available)\n", c.Cores, c.Threads, c.MemTotal, c.MemAvail)
	if len(c.Features) > 0 {
		fmt.Fprintf(w, "\tSIMD: %s\n", strings.Join(c.Features, " "))
	}
	fmt.Fprintf(w, "\tclass %s: %s\n", c.Class.Label, c.Class.Note)
	fmt.Fprintln(w)
	if len(r.GPUs) == 0 {
		fmt.Fprintln(w, "GPUs (sysfs)\tnone found")
	}
	for _, g := range r.GPUs {
		fmt.Fprintf(w, "GPU %s\t%s [%s:%s] %s", g.Address, g.Name, g.VendorID, g.DeviceID, g.Kind)
		if g.Driver != "" {
			fmt.Fprintf(w, ", driver %s", g.Driver)
		}
		if g.VRAM > 0 {
			fmt.Fprintf(w, ", %d MiB VRAM", g.VRAM)
			if g.VRAMUsed > 0 {
				fmt.Fprintf(w, " (%d MiB used)", g.VRAMUsed)
			}
		}
		if g.BootVGA {
			fmt.Fprint(w, ", boot VGA")
		}
		if g.DriverVersion != "" || g.ComputeCap != "" {
			fmt.Fprintf(w, "\n\tnvidia-smi: GPU %d, driver %s, compute capability %s", derefInt(g.SMIIndex), orDash(g.DriverVersion), orDash(g.ComputeCap))
		}
		fmt.Fprintf(w, "\n\tclass %s: %s\n\tbackends: %s\n", g.Class.Label, g.Class.Note, joinBackends(g.Class.Backends))
	}
	if r.SMIErr != "" {
		fmt.Fprintf(w, "\tnvidia-smi: %s\n", r.SMIErr)
	}
	if r.LlamaServer != "" {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "llama-server\t%s\n", r.LlamaServer)
		if r.RuntimeErr != "" {
			fmt.Fprintf(w, "\terror: %s\n", r.RuntimeErr)
		}
		fmt.Fprintf(w, "  none\tCPU backend (-dev none)\n")
		for _, d := range r.Runtime {
			fmt.Fprintf(w, "  %s\t%s, %s, %d MiB (%d MiB free)\n\tclass %s: %s\n", d.Name, d.Description, d.Kind, d.Total, d.Free, d.Class.Label, d.Class.Note)
		}
		for _, u := range r.Unreached {
			fmt.Fprintf(w, "  missing\t%s\n", u.BuildNote("this llama-server"))
		}
	}
	w.Flush()
}

func joinBackends(bs []devices.Backend) string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = string(b)
	}
	return strings.Join(s, ", ")
}

func derefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// lookPathCause returns why exec.LookPath refused a path, without
// repeating the path.
func lookPathCause(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}
