// Package toolpolicy is the tool_policy check: which tools a model may call
// and with what arguments. It holds allow and deny lists of tool names,
// per-tool rules written in CEL over the parsed arguments, the request's
// messages and the declared tools, and two built-in rules that need no
// configuration for tools whose names and schemas say what they are:
//
//   - flow (the egress rule): every argument value of a call that sends
//     something out (mail, messages, HTTP, transfers, uploads, a network
//     command in a shell) is traced to where its bytes came from (package
//     provenance). Private data (the system prompt, tool results) going
//     to a destination an untrusted source chose (a tool result, a tool's
//     declaration) or nobody named is data_exfiltration; a destination
//     only an injected result named is prompt_injection whatever the call
//     carries; a send to a destination nobody named is data_exfiltration
//     too, and so is a payment to a recipient only a tool result or a
//     declaration named, flagged or not. The user's destinations, the system prompt's, the allow list's,
//     the company's own domain and the sender of an e-mail the user asked
//     to answer are trusted; a read (a GET) that carries nothing private
//     passes. A markdown image in the answer is judged like a call: its
//     URL is fetched when the answer is rendered.
//   - shell: a tool that runs commands may not run destructive or
//     remote-code commands (rm -rf /, mkfs, dd to a device, fork bombs,
//     curl | sh, reverse shells, boot-loader changes): unsafe_content.
//     Commands are parsed (mvdan.cc/sh/v3/syntax, shellast.go) for
//     decoder or download pipelines into interpreters, persistence,
//     permission changes on credential files and data carried by network
//     or DNS tools.
//   - sql: statements of a SQL tool are parsed (sql.go), or, where the
//     MySQL-dialect parser cannot read them (PostgreSQL's own syntax),
//     classified by a tokeniser (sqlscan.go); DROP, TRUNCATE, ALTER, GRANT
//     and DELETE or UPDATE without WHERE are unsafe_content unless the
//     user asked for exactly that.
package toolpolicy

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Name is the registry name of the check.
const Name = "tool_policy"

// Rule is one CEL rule for a tool.
type Rule struct {
	// Expr is a CEL expression that must be true for the call to pass.
	Expr string `yaml:"expr" json:"expr"`
	// Message says what the rule asks, for the finding and the corrective
	// retry.
	Message string `yaml:"message" json:"message"`
	// Reason is the finding's reason code (default malformed_tool_call,
	// which retries with the message restated).
	Reason validator.Reason `yaml:"reason" json:"reason"`
}

// Egress configures the egress rule.
type Egress struct {
	// Enabled switches the rule on (default true).
	Enabled bool `yaml:"enabled" json:"enabled"`
	// Auto recognises egress tools by name and schema (default true).
	Auto bool `yaml:"auto" json:"auto"`
	// Tools are further tool names the rule applies to.
	Tools []string `yaml:"tools" json:"tools"`
	// Allow lists destinations that are always fine: addresses, domains
	// (a host matches its parent domains), accounts.
	Allow []string `yaml:"allow" json:"allow"`
}

// Shell configures the shell rule.
type Shell struct {
	Enabled bool     `yaml:"enabled" json:"enabled"`
	Auto    bool     `yaml:"auto" json:"auto"`
	Tools   []string `yaml:"tools" json:"tools"`
}

// Config configures tool_policy.
type Config struct {
	// Allow, when not empty, is the only tools the model may call.
	Allow []string `yaml:"allow" json:"allow"`
	// Deny are tools the model may never call.
	Deny []string `yaml:"deny" json:"deny"`
	// Rules are CEL rules by tool name ("*" for every tool).
	Rules  map[string][]Rule `yaml:"rules" json:"rules"`
	Egress Egress            `yaml:"egress" json:"egress"`
	Shell  Shell             `yaml:"shell" json:"shell"`
}

// DefaultConfig turns on the built-in rules with recognition by name and
// schema.
func DefaultConfig() *Config {
	return &Config{Egress: Egress{Enabled: true, Auto: true}, Shell: Shell{Enabled: true, Auto: true}}
}

// Screen judges the text of a tool result of req for indirect prompt
// injection at the low bar the egress rule uses, given what the user
// asked (their messages joined): true when the text looks injected, with
// a short reason. The checks package wires the guard's screen in (which
// shares its scores with the gateway's input screening through req); nil
// means no tool result is flagged.
type Screen func(req *validator.Request, text, user string) (bool, string)

const doc = `Judges every tool call the model makes (after tool_call has checked its name and
JSON). allow: only these tools may be called; deny: these never. rules: per tool
("*" for all), CEL expressions that must be true, over args (the parsed arguments),
tool (its name), messages (list of {role, content, name, tool_call_id}) and tools
(the declared {name, description}); a false rule fails with its message (reason
malformed_tool_call by default: the model is asked again with the rule restated).

egress: tools that send something out are recognised by name (send_email,
post_message, http_request, transfer_money, upload_file, ...) and schema (a to,
recipient, url, iban or account parameter); network commands (dig, curl, ssh, ...)
in a shell tool count too. Each destination (e-mail addresses, URL hosts, IBANs,
the values of recipient-like parameters) is trusted when the user, the system
prompt or the allow list named it, when it is at a domain the user or the system
prompt named, or when it is the sender of an e-mail the user asked to answer. Every
argument value is traced, after folding case, spacing, zero-width and look-alike
characters and decoding URL escapes, base64, hex and ROT13, to the system prompt
and the tool results it copies, across the calls of the turn and the earlier
turns. Private data to an untrusted destination fails with data_exfiltration, or
prompt_injection when an injected tool result named the destination (which fails
whatever the call carries); a send (not a GET) to a destination nobody named, and a
payment (a tool named for moving money, or an amount argument) to a recipient only a
tool result or a declaration named, fail with data_exfiltration. Accounts, IBANs and
phone numbers are named however they are spaced; of the system prompt, its
secret-looking tokens (canaries) are private in any copy, the rest in long ones. A markdown image in the answer whose URL carries private
data to an untrusted host fails the same way. Messages name the parameter, the
byte count and the source, never a value.

shell: tools that run commands (bash, shell, run_command, execute, terminal, or a
command/cmd/script parameter) may not run destructive or remote-code commands:
rm -rf of / or ~, mkfs, dd or redirection onto a disk device, fork bombs, a
download piped into a shell, reverse shells, boot-loader changes (unsafe_content).
Commands are parsed as shell (bash) first: a decoder or download piped into an
interpreter, an interpreter running a command substitution that downloads or
decodes, persistence (crontab, authorized_keys, shell start-up files, systemd
units), opening permissions on credential files, network tools sending computed
data or credential files, and DNS lookups of computed names fail unsafe_content; a
command that does not parse fails malformed_tool_call.

sql: tools that run SQL (a sql parameter, or a query/statement parameter on a tool
named for a database) have their statements parsed: DROP, TRUNCATE, ALTER, GRANT,
and DELETE or UPDATE without WHERE fail unsafe_content unless the user's messages
name the operation and every table it touches. Statements the MySQL-dialect parser
cannot read (PostgreSQL's :: casts, $1 parameters, RETURNING, ON CONFLICT, CASCADE,
dollar-quoted bodies) are classified by their tokens: the leading keyword, the tables
after it, a WHERE at the statement's own depth, the statements of a WITH clause, of a
DO block and of the strings it EXECUTEs. Text that is not SQL holds no operation.

Findings name the call and the argument: tool_calls/N/arguments/path, offsets
into that value.`

// Register adds the check to r; screen flags injected tool results (nil:
// none are).
func Register(r *validator.Registry, screen Screen) {
	r.Register(validator.Spec{
		Name:    Name,
		Summary: "tool allow/deny lists, CEL argument rules, and the built-in egress and shell rules",
		Doc:     doc,
		Reasons: []validator.Reason{validator.ReasonMalformedToolCall, validator.ReasonDataExfiltration, validator.ReasonPromptInjection, validator.ReasonUnsafeContent},
		Example: `deny: [delete_repository]
rules:
  send_email:
    - expr: 'args.to.endsWith("@corp.example")'
      message: mail only to corp.example addresses
egress:
  enabled: true
  auto: true
  tools: [notify_partner]
  allow: [corp.example, billing@supplier.example]
shell:
  enabled: true
  auto: true
  tools: [run]
`,
		Config: func() any { return DefaultConfig() },
		New: func(cfg any, req *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*Config)
			if c == nil {
				c = DefaultConfig()
			}
			return New(c, req, screen)
		},
	})
}

// Validator is the tool_policy check for one attempt.
type Validator struct {
	cfg    *Config
	req    *validator.Request
	screen Screen
	rules  map[string][]compiled
	n      int

	flow flowState // the flow rule's index and what earlier calls sent
	img  image     // the answer's markdown image in progress
	// kinds remembers, by tool name, whether the built-in shell and
	// egress rules apply: deciding reads the tool's declared schema.
	kinds map[string]toolKind
}

// toolKind says which built-in rules apply to a tool.
type toolKind struct{ shell, egress, sql bool }

// kind decides, once per tool name, which built-in rules apply to it.
func (v *Validator) kind(name string) toolKind {
	if k, ok := v.kinds[name]; ok {
		return k
	}
	tool := v.declared(name)
	k := toolKind{
		shell:  v.cfg.Shell.Enabled && (contains(v.cfg.Shell.Tools, name) || v.cfg.Shell.Auto && isShell(name, tool)),
		egress: v.cfg.Egress.Enabled && (contains(v.cfg.Egress.Tools, name) || v.cfg.Egress.Auto && isEgress(name, tool)),
		sql:    v.cfg.Shell.Enabled && v.cfg.Shell.Auto && isSQL(name, tool),
	}
	if v.kinds == nil {
		v.kinds = map[string]toolKind{}
	}
	if len(v.kinds) < 64 {
		v.kinds[name] = k
	}
	return k
}

// New builds the check for req.
func New(cfg *Config, req *validator.Request, screen Screen) (*Validator, error) {
	if req == nil {
		req = &validator.Request{}
	}
	v := &Validator{cfg: cfg, req: req, screen: screen}
	if len(cfg.Rules) > 0 {
		v.rules = map[string][]compiled{}
		for tool, rs := range cfg.Rules {
			for i, r := range rs {
				p, err := compile(r.Expr)
				if err != nil {
					return nil, fmt.Errorf("tool_policy: rules.%s[%d]: %w", tool, i, err)
				}
				if r.Reason != validator.ReasonNone && !r.Reason.Valid() {
					return nil, fmt.Errorf("tool_policy: rules.%s[%d]: unknown reason %q", tool, i, r.Reason)
				}
				v.rules[tool] = append(v.rules[tool], compiled{Rule: r, prg: p})
			}
		}
	}
	return v, nil
}

// Name implements validator.Validator.
func (v *Validator) Name() string { return Name }

// Write implements validator.Validator: the text is read for markdown
// images, whose URLs the flow rule judges.
func (v *Validator) Write(p []byte) (int, error) {
	v.images(p, v.n)
	v.n += len(p)
	return len(p), nil
}

// Settled implements validator.Validator: everything but an image in
// progress.
func (v *Validator) Settled() int {
	if bang, _ := v.img.scan.Pending(); bang >= 0 && len(v.img.finds) == 0 {
		return bang
	}
	return v.n
}

// Findings implements validator.Validator: the answer's images; calls
// are judged by CheckToolCall.
func (v *Validator) Findings() []validator.Finding { return v.img.finds }

// Close implements validator.Validator: an image whose URL reaches the
// end of the answer is judged there.
func (v *Validator) Close() {
	if img, ok := v.img.scan.End(); ok {
		v.endImage(img)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// CheckToolCall implements validator.ToolCallChecker.
func (v *Validator) CheckToolCall(call validator.ToolCall) []validator.Finding {
	base := "tool_calls/" + strconv.Itoa(call.Index)
	fail := func(reason validator.Reason, path string, start, end int, format string, args ...any) validator.Finding {
		return validator.Finding{Check: Name, Reason: reason, Start: start, End: end, Path: path,
			Message: fmt.Sprintf(format, args...)}
	}
	if contains(v.cfg.Deny, call.Name) {
		return []validator.Finding{fail(validator.ReasonMalformedToolCall, base+"/name", 0, 0,
			"tool %q is denied by the policy; do not call it", call.Name)}
	}
	if len(v.cfg.Allow) > 0 && !contains(v.cfg.Allow, call.Name) {
		return []validator.Finding{fail(validator.ReasonMalformedToolCall, base+"/name", 0, 0,
			"tool %q is not among the tools the policy allows (%s)", call.Name, strings.Join(v.cfg.Allow, ", "))}
	}
	kind := v.kind(call.Name)
	ruled := len(v.rules["*"]) > 0 || len(v.rules[call.Name]) > 0
	if !ruled && !kind.shell && !kind.egress && !kind.sql {
		return nil // nothing here reads this call
	}
	var args any
	if s := strings.TrimSpace(call.Arguments); s != "" {
		// Only rules read the decoded arguments; without any, checking
		// that they are JSON is enough, and the egress and shell checks
		// read the values that one pass found.
		if !ruled {
			if !toolcalls.Of(call).Valid {
				return nil // tool_call reports arguments that are not JSON
			}
		} else if json.Unmarshal([]byte(s), &args) != nil {
			return nil // tool_call reports arguments that are not JSON
		}
	}
	var out []validator.Finding
	for _, key := range []string{"*", call.Name} {
		for _, r := range v.rules[key] {
			ok, err := r.eval(call.Name, args, v.req)
			if err == nil && ok {
				continue
			}
			msg := r.Message
			if msg == "" {
				msg = "rule " + r.Expr
			}
			if err != nil {
				msg += fmt.Sprintf(" (the rule could not be evaluated: %v)", err)
			}
			reason := r.Reason
			if reason == validator.ReasonNone {
				reason = validator.ReasonMalformedToolCall
			}
			out = append(out, fail(reason, base+"/arguments", 0, len(call.Arguments), "call to %q breaks a tool rule: %s", call.Name, msg))
		}
	}
	if kind.shell {
		out = append(out, v.checkShell(call, base)...)
	}
	if kind.egress || kind.shell {
		out = append(out, v.judgeFlow(call, base)...)
	}
	if kind.sql {
		out = append(out, v.checkSQL(call, base)...)
	}
	return out
}

func (v *Validator) declared(name string) *validator.Tool {
	for i := range v.req.Tools {
		if v.req.Tools[i].Name == name {
			return &v.req.Tools[i]
		}
	}
	return nil
}

var _ validator.ToolCallChecker = (*Validator)(nil)
