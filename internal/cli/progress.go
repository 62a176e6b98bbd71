package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// progressLines reports progress as one plain line per step, for output
// that is not a terminal (a pipe, a CI log), where a redrawn bar would be
// noise: "[12/30] step".
func progressLines(w io.Writer, prefix string) func(done, total int, step string) {
	return func(done, total int, step string) {
		fmt.Fprintf(w, "%s[%d/%d] %s\n", prefix, done, total, step)
	}
}

// stepper prints a line when a long command starts a step, with the time
// since it began: "aegis train: 12.3s training".
type stepper struct {
	w     io.Writer
	name  string
	start time.Time
}

func (s stepper) step(format string, args ...any) {
	fmt.Fprintf(s.w, "%s: %5.1fs %s\n", s.name, time.Since(s.start).Seconds(), fmt.Sprintf(format, args...))
}

// userModelPath is where aegis train writes a model unless told
// otherwise: the user's data directory, never the source tree.
func userModelPath() (string, error) {
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no data directory: %w", err)
		}
		dir = filepath.Join(home, ".local", "share")
	}
	dir = filepath.Join(dir, "aegis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(dir, "guard.bin"), nil
}
