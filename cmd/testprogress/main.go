// Package main is the testprogress command: it reads `go test -json` on stdin and prints package
// results, failing tests' output, a progress line every 20 seconds and a
// summary; it exits 1 when a package failed. scripts/test uses it.
package main

import (
	"os"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testprogress"
)

func main() {
	if !testprogress.Run(os.Stdin, os.Stdout, nil, 20*time.Second) {
		os.Exit(1)
	}
}
