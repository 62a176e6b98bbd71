// Package llamaproc starts llama-server: Launch builds the one
// llama-server command line for a model on a device (the device pin and
// the backend's recipe), and ExecStarter and Stop run and stop it as a
// process group. The guard supervisor and the sweep both start their
// servers this way. Calling a running server is package llamaserver's job.
package llamaproc

import (
	"strconv"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

// Launch is one llama-server to start: its model, where it listens, its
// sizes, and the device it is pinned to. It is the one place Aegis builds
// a llama-server command line (the guard supervisor and the sweep use it).
type Launch struct {
	Binary   string
	Model    string
	Port     int // on 127.0.0.1
	CtxSize  int // -c; 0 leaves the server's default
	Parallel int // -np; 0 leaves the server's default
	Threads  int // -t; 0 leaves the server's default
	// Device pins the server to a device with -dev and offloads every
	// layer to it (-dev none -ngl 0 for the CPU), with the backend's
	// recipe and the device's own Env and Args. A Device without a name
	// pins nothing: the extra arguments decide.
	Device devices.Device
	Args   []string // extra arguments for this server, before the device's
	Env    []string // added to the environment, before the device's
}

// Command returns the server's arguments and the variables added to its
// environment.
func (l Launch) Command() (args, env []string) {
	args = []string{"-m", l.Model, "--host", "127.0.0.1", "--port", strconv.Itoa(l.Port)}
	if l.CtxSize > 0 {
		args = append(args, "-c", strconv.Itoa(l.CtxSize))
	}
	if l.Parallel > 0 {
		args = append(args, "-np", strconv.Itoa(l.Parallel))
	}
	args = append(args, "--no-webui")
	if l.Threads > 0 {
		args = append(args, "-t", strconv.Itoa(l.Threads))
	}
	env = append(env, l.Env...)
	d := l.Device
	if d.Name != "" {
		// Always pin the device: with several visible devices llama-server
		// would otherwise pick for itself (a Vulkan software rasterizer
		// takes a CPU model when no -dev is given).
		if d.IsCPU() {
			args = append(args, "-dev", "none", "-ngl", "0")
		} else {
			args = append(args, "-dev", d.Name, "-ngl", "99")
		}
		switch devices.BackendOf(d.Name) {
		case devices.BackendSYCL:
			// iGPU recipe: no persistent kernel cache, no oneDNN, no
			// flash attention, f16 KV.
			env = append(env, "SYCL_CACHE_PERSISTENT=0", "GGML_SYCL_DISABLE_DNN=1")
			args = append(args, "-fa", "off", "-ctk", "f16", "-ctv", "f16")
		}
	}
	args = append(args, l.Args...)
	args = append(args, d.Args...)
	env = append(env, d.Env...)
	return args, env
}

// Spec is the Starter's description of the launch, feeding the server's
// output lines to output (may be nil).
func (l Launch) Spec(output func(line string)) Spec {
	args, env := l.Command()
	return Spec{Path: l.Binary, Args: args, Env: env, Output: output}
}
