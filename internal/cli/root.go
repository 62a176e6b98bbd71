// Package cli wires the aegis subcommands: one file per subcommand, each a
// thin layer that parses flags and calls into the package that does the job.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/checks"
	"github.com/aegis-sentinel/aegis/internal/reaper"
)

// Exit codes shared by every subcommand.
const (
	ExitOK      = 0 // success; for check: every case passed
	ExitFailure = 1 // the command ran and found failures, or a runtime error
	ExitUsage   = 2 // bad flags, missing arguments or unusable input
)

// exitError carries an exit code through cobra's error return.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks err as a usage error (exit 2).
func usageErr(err error) error { return &exitError{code: ExitUsage, err: err} }

// usagef formats a usage error (exit 2).
func usagef(format string, args ...any) error { return usageErr(fmt.Errorf(format, args...)) }

// silentExit ends the command with code and no further message: the
// command has already written its own output (check's failing verdicts).
func silentExit(code int) error { return &exitError{code: code} }

// IO is where a subcommand reads and writes; tests substitute buffers.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
	// Self is this program's path, re-executed as the reaper of the MCP
	// servers aegis mcp stdio starts; empty (as in tests that run the
	// commands in process): the servers are started directly.
	Self string
}

// command is one subcommand constructor.
type command func(*IO) *cobra.Command

// subcommands is filled by each subcommand file's init, so adding a
// subcommand touches only its own file.
var subcommands []command

func register(c command) { subcommands = append(subcommands, c) }

// NewRoot builds the aegis command tree. It registers the built-in checks
// in validator.Default, where the commands' policies find them.
func NewRoot(stdio *IO) *cobra.Command {
	checks.RegisterDefault()
	root := &cobra.Command{
		Use:   "aegis",
		Short: "A local sentinel for LLM output",
		Long: `Aegis sits in front of llama-server, Ollama or any OpenAI-compatible server and checks
every streamed response: fast deterministic validators on the CPU and a small guard model
on whichever device measures best. It releases what is good, quietly repairs what can be
repaired, and stops what must be stopped, with a stable error code.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without subcommand: print help, exit 0.
	}
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	root.CompletionOptions.HiddenDefaultCmd = true
	root.Version = buildVersion().line() // aegis --version, as aegis version prints it
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr(fmt.Errorf("%w\nRun '%s --help' for usage.", err, c.CommandPath()))
	})
	for _, c := range subcommands {
		root.AddCommand(c(stdio))
	}
	return root
}

// Main runs aegis with args and returns the process exit code.
func Main(args []string, in io.Reader, out, errw io.Writer) int {
	if reaper.Child() {
		return reaper.Main(args, errw)
	}
	self, _ := os.Executable()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return Run(ctx, args, &IO{In: in, Out: out, Err: errw, Self: self})
}

// Run is Main with an explicit context and IO, for tests.
func Run(ctx context.Context, args []string, stdio *IO) int {
	root := NewRoot(stdio)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitFailure
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	} else if isCobraUsageError(err) {
		code = ExitUsage
		err = fmt.Errorf("%w\nRun '%s --help' for usage.", err, cmd.CommandPath())
	}
	if msg := err.Error(); msg != "" && !(ee != nil && ee.err == nil) {
		fmt.Fprintf(stdio.Err, "aegis: %s\n", msg)
	}
	return code
}

// exactArgs, rangeArgs and noArgs are cobra argument checks whose errors
// exit with ExitUsage and say what was expected.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s needs %s (got %d arguments)\nRun '%s --help' for usage.", c.CommandPath(), what, len(args), c.CommandPath())
		}
		return nil
	}
}

func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments (got %q)\nRun '%s --help' for usage.", c.CommandPath(), args[0], c.CommandPath())
	}
	return nil
}

// isCobraUsageError recognises the errors cobra itself returns for an
// unknown subcommand or wrong argument count.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "received ", "unknown flag", "unknown shorthand"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
