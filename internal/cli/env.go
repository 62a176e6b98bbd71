package cli

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// envName is the environment variable of a flag: AEGIS_ and the flag's
// name in upper case with dashes as underscores (--max-body-bytes is
// AEGIS_MAX_BODY_BYTES).
func envName(flag string) string {
	return "AEGIS_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// flagsFromEnv sets each flag of fs that the command line left unset from
// its environment variable, the way OLLAMA_HOST or llama-server's
// LLAMA_ARG_* work: the command line wins, then the environment, then
// the default. Hidden flags (former names) are skipped: their new name is read.
func flagsFromEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Hidden {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, e)
		}
	})
	return err
}

// hostPort combines --host and --port with --listen: each replaces its
// half of the listen address.
func hostPort(listen, host string, port int) (string, error) {
	h, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w", listen, err)
	}
	if host != "" {
		h = host
	}
	if port != 0 {
		if port < 0 || port > 65535 {
			return "", fmt.Errorf("--port %d: want 1 to 65535", port)
		}
		p = strconv.Itoa(port)
	}
	return net.JoinHostPort(h, p), nil
}
