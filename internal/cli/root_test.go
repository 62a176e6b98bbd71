package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, &IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
		wantStdout string
	}{
		{name: "no args prints help", args: nil, wantCode: ExitOK, wantStdout: "Usage:"},
		{name: "help flag", args: []string{"--help"}, wantCode: ExitOK, wantStdout: "Available Commands"},
		{name: "unknown command", args: []string{"bogus"}, wantCode: ExitUsage, wantStderr: `unknown command "bogus"`},
		{name: "unknown root flag", args: []string{"--bogus"}, wantCode: ExitUsage, wantStderr: "unknown flag: --bogus"},
		{name: "unknown subcommand flag", args: []string{"version", "--bogus"}, wantCode: ExitUsage, wantStderr: "aegis version --help"},
		{name: "extra argument", args: []string{"version", "x"}, wantCode: ExitUsage, wantStderr: "takes no arguments"},
		{name: "version", args: []string{"version"}, wantCode: ExitOK, wantStdout: "aegis "},
		{name: "version json", args: []string{"version", "--json"}, wantCode: ExitOK, wantStdout: `"go":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := run(tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.wantCode, errs)
			}
			if !strings.Contains(errs, tt.wantStderr) {
				t.Errorf("stderr %q does not contain %q", errs, tt.wantStderr)
			}
			if !strings.Contains(out, tt.wantStdout) {
				t.Errorf("stdout %q does not contain %q", out, tt.wantStdout)
			}
		})
	}
}

// TestEverySubcommandExplainsItself walks the whole command tree: each
// command has a short description, its --help exits 0 and shows usage,
// and an unknown flag exits 2 naming the flag.
func TestEverySubcommandExplainsItself(t *testing.T) {
	root := NewRoot(&IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	want := map[string]bool{"serve": false, "check": false, "devices": false, "bench": false, "plan": false, "validators": false, "version": false}
	var paths [][]string
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			continue
		}
		if _, ok := want[c.Name()]; ok {
			want[c.Name()] = true
		}
		if c.Short == "" {
			t.Errorf("%s has no short description", c.CommandPath())
		}
		paths = append(paths, []string{c.Name()})
		for _, sub := range c.Commands() {
			if sub.Short == "" {
				t.Errorf("%s has no short description", sub.CommandPath())
			}
			paths = append(paths, []string{c.Name(), sub.Name()})
		}
	}
	for name, seen := range want {
		if !seen {
			t.Errorf("subcommand %q is missing", name)
		}
	}
	for _, p := range paths {
		t.Run(strings.Join(p, "_"), func(t *testing.T) {
			code, out, errs := run(append(p, "--help")...)
			if code != ExitOK || !strings.Contains(out, "Usage:") {
				t.Errorf("--help: exit %d, stdout %q, stderr %q", code, out, errs)
			}
			code, _, errs = run(append(p, "--no-such-flag")...)
			if code != ExitUsage || !strings.Contains(errs, "--no-such-flag") {
				t.Errorf("unknown flag: exit %d, stderr %q; want %d naming the flag", code, errs, ExitUsage)
			}
		})
	}
}
