package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is set at link time with -ldflags "-X .../internal/cli.Version=v1.2.3".
var Version = "dev"

type versionInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

// line is the one-line version: aegis v1.2.3 (commit 0123456789ab, go1.x, linux/amd64).
func (v versionInfo) line() string {
	commit := v.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if v.Modified {
		commit += "+dirty"
	}
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("aegis %s (commit %s, %s, %s)", v.Version, commit, v.Go, v.Platform)
}

func init() {
	register(func(stdio *IO) *cobra.Command {
		var asJSON bool
		c := &cobra.Command{
			Use:   "version",
			Short: "Print the aegis version, commit and Go runtime",
			Args:  noArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				v := buildVersion()
				if asJSON {
					enc := json.NewEncoder(stdio.Out)
					return enc.Encode(v)
				}
				_, err := fmt.Fprintln(stdio.Out, v.line())
				return err
			},
		}
		c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
		return c
	})
}
