// Package main is the aegis command, a local sentinel for LLM output: an OpenAI-compatible
// gateway that checks every streamed response and releases, repairs or
// stops it. Run `aegis --help` for the subcommands.
package main

import (
	"os"

	"github.com/aegis-sentinel/aegis/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
