package toolpolicy

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Shell commands are parsed with mvdan.cc/sh/v3/syntax (the parser behind
// shfmt) and judged on the tree: which program each command runs, what
// its arguments are, where its output is redirected, and what feeds what
// in a pipeline or through a command substitution. Quoting, line
// continuations and variable tricks do not hide a command from it the way
// they hide one from a pattern.

// maxShell bounds the command text handed to the parser.
const maxShell = 64 << 10

// shellFinding is one thing a command does that the rule refuses.
type shellFinding struct {
	what       string
	start, end int
}

var (
	interpreters = set("sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "python", "python2", "python3",
		"perl", "ruby", "node", "php", "lua", "eval", "source", ".", "pwsh", "powershell")
	downloaders = set("curl", "wget", "fetch", "aria2c", "nc", "ncat", "netcat", "socat", "tftp", "ftp")
	netSenders  = set("curl", "wget", "nc", "ncat", "netcat", "socat", "scp", "rsync", "sftp", "ftp", "telnet",
		"ssh", "http", "httpie", "xh")
	rawSockets = set("nc", "ncat", "netcat", "socat", "telnet")
	dnsTools   = set("dig", "nslookup", "host", "drill", "ping", "ping6", "traceroute", "resolvectl", "getent")
	wrappers   = set("sudo", "doas", "env", "nohup", "time", "exec", "command", "builtin", "nice", "stdbuf", "timeout",
		"xargs")
)

func set(s ...string) map[string]bool {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return m
}

// persistPath reports whether writing to p makes something run again
// later: cron, authorized keys, shell start-up files, systemd units,
// rc.local, profile.d, launch agents.
func persistPath(p string) bool {
	l := strings.ToLower(p)
	base := path.Base(l)
	switch {
	case strings.Contains(l, "authorized_keys"), strings.Contains(l, "/cron"), strings.HasPrefix(l, "/var/spool/cron"),
		strings.Contains(l, "systemd/") && (strings.HasSuffix(l, ".service") || strings.HasSuffix(l, ".timer")),
		strings.HasPrefix(l, "/etc/rc.local"), strings.HasPrefix(l, "/etc/profile"), strings.HasPrefix(l, "/etc/init.d/"),
		strings.Contains(l, "launchagents/"), strings.Contains(l, "launchdaemons/"), strings.HasPrefix(l, "/etc/ld.so.preload"):
		return true
	}
	switch base {
	case ".bashrc", ".bash_profile", ".bash_login", ".profile", ".zshrc", ".zprofile", ".zshenv", ".kshrc",
		".cshrc", ".tcshrc", ".bash_logout", "config.fish", "bash.bashrc", "zshrc":
		return true
	}
	return false
}

// credentialPath reports whether p is a file that holds credentials or
// accounts.
func credentialPath(p string) bool {
	l := strings.ToLower(p)
	base := path.Base(l)
	switch {
	case l == "/etc/shadow", l == "/etc/gshadow", l == "/etc/passwd", l == "/etc/group", strings.HasPrefix(l, "/etc/sudoers"),
		strings.Contains(l, ".ssh/"), strings.HasSuffix(l, "/.ssh"), strings.Contains(l, ".aws/"), strings.Contains(l, ".gnupg"),
		strings.Contains(l, ".kube/config"), strings.Contains(l, ".docker/config.json"):
		return true
	}
	switch base {
	case ".env", ".netrc", ".pgpass", ".git-credentials", "credentials", "id_rsa", "id_ed25519", "id_ecdsa", "id_dsa",
		"shadow", "master.key", "secrets.yml", "secrets.yaml":
		return true
	}
	return strings.HasSuffix(base, ".pem") || strings.HasSuffix(base, ".key") || strings.HasSuffix(base, ".p12")
}

// judgeShell parses a command line and returns what it does that the
// shell rule refuses; err says why the text could not be parsed.
func judgeShell(text string) ([]shellFinding, error) {
	if len(text) > maxShell {
		return nil, errTooLong
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(text), "")
	if err != nil {
		return nil, err
	}
	var out []shellFinding
	add := func(n syntax.Node, what string) {
		out = append(out, shellFinding{what: what, start: int(n.Pos().Offset()), end: int(n.End().Offset())})
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.BinaryCmd:
			if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
				judgePipeline(x, add)
			}
		case *syntax.Stmt:
			for _, r := range x.Redirs {
				if r.Word == nil {
					continue
				}
				target, _ := wordText(r.Word)
				switch r.Op {
				case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob:
					if persistPath(target) {
						add(x, "persistence: writing to a start-up, cron, key or service file")
					}
				}
			}
		case *syntax.CallExpr:
			judgeCall(x, add)
		}
		return true
	})
	return out, nil
}

type errString string

func (e errString) Error() string { return string(e) }

const errTooLong = errString("command longer than 64 KiB")

// pipeStages flattens a pipeline into its commands, left to right.
func pipeStages(c syntax.Command, out []syntax.Command) []syntax.Command {
	if b, ok := c.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) {
		out = pipeStages(b.X.Cmd, out)
		return pipeStages(b.Y.Cmd, out)
	}
	return append(out, c)
}

// judgePipeline refuses a pipeline whose interpreter stage reads what a
// decoder or a download produced.
func judgePipeline(b *syntax.BinaryCmd, add func(syntax.Node, string)) {
	stages := pipeStages(b, nil)
	source := ""
	for i, st := range stages {
		call, ok := st.(*syntax.CallExpr)
		if !ok {
			continue
		}
		name, args := program(call)
		switch {
		case i > 0 && rawSockets[name]:
			add(b, "pipes data into a network connection")
			return
		case downloaders[name]:
			source = "a download"
		case isDecoder(name, args):
			source = "a decoder"
		case interpreters[name] && source != "" && !interpreterHasScript(name, args):
			add(b, "runs "+source+" piped into an interpreter")
			return
		}
	}
}

// interpreterHasScript: "python3 script.py" reads its own file, not the
// pipe (a "-" or "-c" still reads what it is given).
func interpreterHasScript(name string, args []string) bool {
	for _, a := range args {
		if a == "-" || a == "-s" || a == "/dev/stdin" {
			return false
		}
		if !strings.HasPrefix(a, "-") {
			return name != "eval" && name != "source" && name != "."
		}
	}
	return false
}

// isDecoder recognises commands that turn encoded text back into bytes.
func isDecoder(name string, args []string) bool {
	switch name {
	case "base64", "base32", "basenc":
		return hasAny(args, "-d", "--decode", "-D")
	case "xxd":
		return hasAny(args, "-r", "-revert")
	case "openssl":
		return hasAny(args, "-d") || hasAny(args, "base64")
	case "gunzip", "zcat", "bunzip2", "xz", "unxz", "uudecode", "rev":
		return true
	case "printf":
		for _, a := range args {
			if strings.Contains(a, `\x`) {
				return true
			}
		}
	}
	return false
}

func hasAny(args []string, want ...string) bool {
	for _, a := range args {
		for _, w := range want {
			if a == w || len(w) == 2 && w[0] == '-' && len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a[1:], rune(w[1])) {
				return true
			}
		}
	}
	return false
}

// program returns the program a call runs (after sudo, env and similar
// wrappers, path stripped) and its literal arguments.
func program(call *syntax.CallExpr) (string, []string) {
	var words []string
	for _, w := range call.Args {
		s, _ := wordText(w)
		words = append(words, s)
	}
	for len(words) > 0 {
		name := path.Base(words[0])
		if !wrappers[name] {
			break
		}
		words = words[1:]
		for len(words) > 0 && (strings.HasPrefix(words[0], "-") || strings.Contains(words[0], "=") || isNumber(words[0])) {
			words = words[1:]
		}
	}
	if len(words) == 0 {
		return "", nil
	}
	return path.Base(words[0]), words[1:]
}

func isNumber(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// wordText returns the literal text of a word (quotes removed) and
// whether part of it is computed (a command substitution, a variable).
func wordText(w *syntax.Word) (string, bool) {
	var b strings.Builder
	dyn := false
	var parts func([]syntax.WordPart)
	parts = func(ps []syntax.WordPart) {
		for _, p := range ps {
			switch x := p.(type) {
			case *syntax.Lit:
				b.WriteString(x.Value)
			case *syntax.SglQuoted:
				b.WriteString(x.Value)
			case *syntax.DblQuoted:
				parts(x.Parts)
			default:
				dyn = true
				b.WriteString("$")
			}
		}
	}
	parts(w.Parts)
	return b.String(), dyn
}

// hasSubst reports whether a word holds a command substitution, and
// whether that substitution reads a file, decodes or downloads.
func hasSubst(w *syntax.Word) (subst, reads bool) {
	syntax.Walk(w, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			subst = true
		case *syntax.CallExpr:
			name, args := program(x)
			if len(x.Args) > 0 {
				if first, _ := wordText(x.Args[0]); path.Base(first) == "env" || path.Base(first) == "printenv" {
					reads = true
				}
			}
			if downloaders[name] || isDecoder(name, args) || name == "cat" || name == "head" || name == "env" ||
				name == "printenv" || name == "base64" || name == "xxd" || name == "hostname" || name == "whoami" || name == "tail" {
				reads = true
			}
		}
		return true
	})
	return subst, reads
}

// judgeCall judges one simple command.
func judgeCall(call *syntax.CallExpr, add func(syntax.Node, string)) {
	name, args := program(call)
	if name == "" {
		return
	}
	switch {
	case interpreters[name]:
		// bash -c "$(curl ...)", eval "$(echo ... | base64 -d)", sh <(curl ...)
		for _, w := range call.Args[1:] {
			if s, r := hasSubst(w); s && r {
				add(call, "runs the output of a download or decoder")
				return
			}
		}
	case name == "crontab":
		if !hasAny(args, "-l") {
			add(call, "persistence: installs a crontab")
		}
	case name == "systemctl":
		if hasAny(args, "enable") || hasAny(args, "link") {
			add(call, "persistence: enables a service")
		}
	case name == "tee" || name == "cp" || name == "mv" || name == "ln" || name == "install" || name == "dd":
		for _, a := range args {
			a = strings.TrimPrefix(a, "of=")
			if persistPath(a) {
				add(call, "persistence: writing to a start-up, cron, key or service file")
				return
			}
		}
	case name == "chmod" || name == "chown" || name == "chgrp" || name == "chattr" || name == "setfacl":
		opens := name != "chmod"
		for _, a := range args {
			if name == "chmod" && opensMode(a) {
				opens = true
			}
		}
		for _, a := range args {
			if credentialPath(a) && opens {
				add(call, "permission change on a credential file")
				return
			}
		}
	case dnsTools[name]:
		for _, w := range call.Args[1:] {
			if s, _ := hasSubst(w); s {
				add(call, "DNS or network lookup carrying computed data (exfiltration)")
				return
			}
			if t, dyn := wordText(w); dyn && strings.Contains(t, ".") {
				add(call, "DNS or network lookup carrying computed data (exfiltration)")
				return
			}
		}
	case netSenders[name]:
		for i, w := range call.Args[1:] {
			t, _ := wordText(w)
			if s, r := hasSubst(w); s && r {
				add(call, "network tool sending computed data")
				return
			}
			if strings.HasPrefix(t, "@") && credentialPath(t[1:]) || i > 0 && credentialPath(t) && isUploadFlag(args, i-1) {
				add(call, "network tool sending a credential file")
				return
			}
		}
	}
}

func isUploadFlag(args []string, i int) bool {
	if i < 0 || i >= len(args) {
		return false
	}
	switch args[i] {
	case "-T", "--upload-file", "-F", "--form", "-d", "--data", "--data-binary", "--post-file", "--body-file":
		return true
	}
	return false
}

// opensMode reports whether a chmod mode grants group or others access
// (or is setuid): 777, 644 on a key, o+r, a+rw, +x.
func opensMode(m string) bool {
	if isNumber(m) && len(m) >= 3 {
		tail := m[len(m)-2:]
		return tail != "00" || len(m) == 4 && m[0] != '0'
	}
	if strings.ContainsAny(m, "+=") {
		who := m[:strings.IndexAny(m, "+=")]
		return who == "" || strings.ContainsAny(who, "goa")
	}
	return false
}
