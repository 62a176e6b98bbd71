package toolpolicy

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"mvdan.cc/sh/v3/syntax"
)

// shellWords are name words of tools that run commands.
var shellWords = map[string]bool{
	"bash": true, "sh": true, "zsh": true, "shell": true, "exec": true, "execute": true, "terminal": true,
	"cmd": true, "powershell": true, "command": true, "subprocess": true, "console": true,
}

// commandParams are parameters that hold a command line.
var commandParams = map[string]bool{
	"command": true, "cmd": true, "script": true, "commands": true, "shell": true, "bash": true, "cmdline": true,
	"command_line": true, "shell_command": true,
}

// isShell recognises a tool that runs commands, by a name word or a
// command parameter.
func isShell(name string, t *validator.Tool) bool {
	for _, w := range nameTokens(name) {
		if shellWords[w] {
			return true
		}
	}
	if t == nil {
		return false
	}
	for _, p := range paramNames(t.Parameters) {
		if commandParams[strings.ToLower(p)] {
			return true
		}
	}
	return false
}

// shellRule is one kind of command a shell tool may not run.
type shellRule struct {
	what string
	re   *regexp.Regexp
}

// root is a path that means the whole machine or a home: /, /*, ~, $HOME,
// or a top-level system directory.
const root = `(?:/\*?|~/?\*?|\$HOME/?|\$\{HOME\}/?|/(?:bin|boot|etc|home|lib|lib64|opt|root|sbin|srv|usr|var)/?\*?)`

var shellRules = []shellRule{
	{"recursive delete of the filesystem or a home", regexp.MustCompile(`(?i)\brm\s+(?:-{1,2}[\w-]+\s+)*-(?:[a-z]*r[a-z]*f|[a-z]*f[a-z]*r|-recursive)[a-z]*\s+(?:-{1,2}[\w-]+\s+)*["']?` + root + `["']?(?:\s|$|;|&|\|)`)},
	{"recursive delete of the filesystem or a home", regexp.MustCompile(`(?i)\brm\s+(?:-{1,2}[\w-]+\s+)*-[a-z]*r[a-z]*\s+(?:-{1,2}[\w-]+\s+)*-[a-z]*f[a-z]*\s+["']?` + root + `["']?(?:\s|$|;|&|\|)`)},
	{"rm with --no-preserve-root", regexp.MustCompile(`(?i)--no-preserve-root`)},
	{"making a filesystem", regexp.MustCompile(`(?i)\bmkfs(?:\.\w+)?\s`)},
	{"wiping a device", regexp.MustCompile(`(?i)\b(?:wipefs|shred|blkdiscard)\b[^;&|]*\s/dev/`)},
	{"writing onto a disk device", regexp.MustCompile(`(?i)\bdd\b[^;&|]*\bof=/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|mapper)`)},
	{"redirecting onto a disk device", regexp.MustCompile(`(?i)>\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)`)},
	{"fork bomb", regexp.MustCompile(`:\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:|\bwhile\s+true\s*;\s*do\s+[^;]*&\s*done|\bfork\s*\(\s*\)\s*while|os\.fork\(\)[^\n]*while\s+(?:True|1)`)},
	{"download piped into a shell", regexp.MustCompile(`(?i)\b(?:curl|wget|fetch|iwr|invoke-webrequest)\b[^;&\n]*\|\s*(?:sudo\s+(?:-\w+\s+)*)?(?:ba|z|k|da|fi)?sh\b|\b(?:curl|wget)\b[^;&\n]*\|\s*(?:sudo\s+)?(?:python[0-9.]*|perl|ruby|node|php)\b|(?:ba|z)?sh\s+(?:-c\s+)?["']?\s*<?\(\s*(?:curl|wget)\b|\$\(\s*(?:curl|wget)\b[^)]*\)\s*\|?\s*(?:ba)?sh|\biex\s*\(?\s*(?:\(?\s*new-object\s+net\.webclient|iwr|invoke-webrequest)`)},
	{"reverse shell", regexp.MustCompile(`(?i)/dev/(?:tcp|udp)/|\b(?:nc|ncat|netcat)\b[^;&|\n]*\s-[a-z]*[ec]\s|\bsocat\b[^;\n]*\bexec:|\bbash\s+-i\s*[<>]&|\bmkfifo\b[^;\n]*;[^\n]*\b(?:nc|ncat|netcat)\b|socket\.socket\([^\n]*connect\([^\n]*(?:dup2|subprocess|pty\.spawn)|\bpty\.spawn\(`)},
	{"boot-loader change", regexp.MustCompile(`(?i)\bgrub-install\b|\bgrub2?-mkconfig\b[^;&|]*-o\s|\befibootmgr\b[^;&|]*\s-(?:[a-z]*[bcoBN])|\bbootctl\s+(?:install|remove|update)|\b(?:rm|mv|dd|cp|tee)\b[^;&|]*\s/boot/|>\s*/boot/|\bupdate-grub\b|\bsyslinux\b|\bbcdedit\b`)},
	{"opening the whole filesystem to everyone", regexp.MustCompile(`(?i)\bchmod\s+(?:-[a-z]*R[a-z]*\s+)+0?777\s+/(?:\s|$)|\bchown\s+(?:-[a-z]*R[a-z]*\s+)+\S+\s+/(?:\s|$)`)},
	{"overwriting system accounts", regexp.MustCompile(`(?i)>\s*/etc/(?:passwd|shadow|sudoers)\b`)},
}

// commandText is what a shell call runs: the values of its command-like
// parameters, or every value when it has none.
func commandText(vals []toolcalls.Value) []toolcalls.Value {
	var cmd []toolcalls.Value
	for _, v := range vals {
		segs := strings.Split(v.Path, "/")
		for i := len(segs) - 1; i >= 0; i-- {
			if isIndex(segs[i]) {
				continue
			}
			if commandParams[strings.ToLower(segs[i])] {
				cmd = append(cmd, v)
			}
			break
		}
	}
	if len(cmd) == 0 {
		return vals
	}
	return cmd
}

func (v *Validator) checkShell(call validator.ToolCall, base string) []validator.Finding {
	var out []validator.Finding
	for _, val := range commandText(toolcalls.Of(call).Values) {
		path := base + "/arguments"
		if val.Path != "" {
			path += "/" + val.Path
		}
		fs, err := judgeShell(val.Text)
		if err != nil {
			out = append(out, validator.Finding{
				Check: Name, Reason: validator.ReasonMalformedToolCall, Start: 0, End: len(val.Text), Path: path,
				Message: "call to " + quote(call.Name) + ": the command in " + path + " could not be parsed as a shell command (" + parseWhere(err) + ")",
			})
			continue
		}
		if len(fs) > 0 {
			f := fs[0]
			out = append(out, validator.Finding{
				Check: Name, Reason: validator.ReasonUnsafeContent, Start: f.start, End: f.end, Path: path,
				Message: "call to " + quote(call.Name) + ": " + f.what + " (" + path + ")",
			})
			continue
		}
		for _, r := range shellRules {
			m := r.re.FindStringIndex(val.Text)
			if m == nil {
				continue
			}
			out = append(out, validator.Finding{
				Check: Name, Reason: validator.ReasonUnsafeContent, Start: m[0], End: m[1], Path: path,
				Message: "call to " + quote(call.Name) + " runs a destructive or remote-code command (" + r.what + ") in " + path,
			})
			break
		}
	}
	return out
}

// parseWhere says where a command failed to parse, without its text.
func parseWhere(err error) string {
	var pe syntax.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("line %d, column %d", pe.Pos.Line(), pe.Pos.Col())
	}
	if errors.Is(err, errTooLong) {
		return err.Error()
	}
	return "syntax error"
}
