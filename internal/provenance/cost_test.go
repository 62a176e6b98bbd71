package provenance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/checks"
	"github.com/aegis-sentinel/aegis/internal/guard"
	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/provenance"
	"github.com/aegis-sentinel/aegis/internal/secretrules"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// The cost a request pays for provenance and the credential rules
// together, on an agent conversation shaped like the ones the gateway
// sees: a system prompt, two user turns, tool declarations, three earlier
// calls whose results are several KiB each (an inbox as JSON, a shell
// command's output, a source file read from disk), and the two calls of
// this turn with about 2.5 KiB of arguments. The flow rule indexes the
// conversation and traces the earlier turns' calls (a key split across
// turns counts) and this turn's: every one of them, as if each sent data
// somewhere nobody trusted (the gateway traces only those). The credential
// rules read what the leak check gives them: the output, here every
// argument value (the earlier turns' too). They never read the
// conversation the gateway is sent; the rules-conversation part runs them
// over every text of it as well, an upper bound. The few variant ends the
// source file with a short environment file of credentials; the dense
// variant replaces the source file with an environment file of
// credentials of many kinds and has the calls carry some of them.

type benchCall struct {
	name, args string
}

type conversation struct {
	system, user1, user2 string
	decls                []string
	earlier              []benchCall
	results              []provenance.Source // results of the earlier calls
	calls                []benchCall         // this turn's
}

func readAgent(b testing.TB, name string) string {
	b.Helper()
	d, err := os.ReadFile(filepath.Join("testdata", "agent", name))
	if err != nil {
		b.Fatal(err)
	}
	return string(d)
}

func jsonString(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// randKey is n characters of alphabet from r: a credential's random part.
func randKey(r *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

const (
	alnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upalnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	hexdig  = "0123456789abcdef"
)

// envFile is a deployment's environment file: credentials of the kinds
// gitleaks' rules know, in the assignments and comments such files hold,
// about size bytes.
func envFile(r *rand.Rand, size int) (string, []string) {
	var sb strings.Builder
	var keys []string
	add := func(line, key string) {
		sb.WriteString(line)
		sb.WriteByte('\n')
		if key != "" {
			keys = append(keys, key)
		}
	}
	for i := 0; sb.Len() < size; i++ {
		fmt.Fprintf(&sb, "# --- service %d (rotated 2026-11-%02d) ---\n", i, 1+i%28)
		k := "AKIA" + randKey(r, upalnum, 16)
		add("AWS_ACCESS_KEY_ID="+k, k)
		k = randKey(r, alnum+"/+", 40)
		add("AWS_SECRET_ACCESS_KEY="+k, k)
		k = "ghp_" + randKey(r, alnum, 36)
		add("GITHUB_TOKEN="+k, k)
		k = "sk_live_" + randKey(r, alnum, 24)
		add("STRIPE_SECRET_KEY="+k, k)
		k = "xoxb-" + randKey(r, "0123456789", 12) + "-" + randKey(r, "0123456789", 13) + "-" + randKey(r, alnum, 24)
		add("SLACK_BOT_TOKEN="+k, k)
		k = "SG." + randKey(r, alnum+"-_", 22) + "." + randKey(r, alnum+"-_", 43)
		add("SENDGRID_API_KEY="+k, k)
		k = "npm_" + randKey(r, alnum, 36)
		add("NPM_TOKEN="+k, k)
		k = randKey(r, alnum, 32)
		add(`export DATADOG_API_KEY="`+k+`"`, k)
		k = randKey(r, hexdig, 40)
		add("mailgun_api_key: key-"+k, k)
		k = randKey(r, alnum+"!#%", 18)
		add("DB_PASSWORD='"+k+"'  # staging only", k)
		k = "AIza" + randKey(r, alnum+"-_", 35)
		add("GOOGLE_MAPS_KEY="+k, k)
		k = "hf_" + randKey(r, alnum, 34)
		add("HF_TOKEN="+k, k)
		add("REPORT_BUCKET=s3://halcyon-reports-eu/nightly", "")
		add("LOG_LEVEL=info", "")
	}
	return sb.String(), keys
}

func declarations() []string {
	return []string{
		`search_emails Search the user's mailbox. {"type":"object","properties":{"query":{"type":"string"},"unread":{"type":"boolean"}},"required":["query"]}`,
		`send_email Send an e-mail. {"type":"object","properties":{"to":{"type":"array","items":{"type":"string"}},"subject":{"type":"string"},"body":{"type":"string"}},"required":["to","subject","body"]}`,
		`read_file Read a file of the shared drive or a build machine. {"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`,
		`write_file Write a file. {"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`,
		`run_shell Run a shell command on a build machine. {"type":"object","properties":{"host":{"type":"string"},"command":{"type":"string"}},"required":["host","command"]}`,
	}
}

func agentConversation(b testing.TB, variant string) conversation {
	dense := variant == "dense"
	inbox, log, src := readAgent(b, "inbox.json"), readAgent(b, "git_log.txt"), readAgent(b, "clock.go.txt")
	c := conversation{
		system: readAgent(b, "system.txt"),
		user1: "Check my unread e-mail about the staging migration, then look at what changed in the repository on ci-04 " +
			"and at internal/clock/clock.go; tell me what could have broken the nightly export.",
		user2: "Thanks. Send Dana a short summary and write the notes to /srv/notes/2026-11-26.md.",
		decls: declarations(),
	}
	readPath := "/srv/aegis/internal/clock/clock.go"
	if variant == "few" {
		// The file read ends in a short environment block: about 1.5
		// credentials a KiB of the whole request.
		env, _ := envFile(rand.New(rand.NewPCG(35, 2)), 1300)
		src = src[:len(src)-len(env)] + env
	}
	if dense {
		r := rand.New(rand.NewPCG(35, 1))
		var keys []string
		src, keys = envFile(r, len(src))
		readPath = "/srv/aegis/deploy/staging.env"
		c.user1 = strings.Replace(c.user1, "internal/clock/clock.go", "deploy/staging.env", 1)
		// The notes quote some of the keys, as a careless summary would.
		notes := "## Nightly export, 26 November\n\nThe export role uses these keys:\n\n"
		for i := 0; i < len(keys) && i < 24; i++ {
			notes += "- `" + keys[i] + "`\n"
		}
		c.calls = append(c.calls, benchCall{"write_file", `{"path":"/srv/notes/2026-11-26.md","content":` + jsonString(notes+"\nRotate them after the maintenance window.\n") + `}`})
		c.calls = append(c.calls, benchCall{"run_shell", `{"host":"ci-04","command":` +
			jsonString("AWS_ACCESS_KEY_ID="+keys[0]+" AWS_SECRET_ACCESS_KEY="+keys[1]+" aws s3 ls s3://halcyon-reports-eu/nightly/ --region eu-west-1") + `}`})
	}
	c.earlier = []benchCall{
		{"search_emails", `{"query":"staging migration","unread":true}`},
		{"run_shell", `{"host":"ci-04","command":"cd /srv/aegis && git log --stat -10"}`},
		{"read_file", `{"path":` + jsonString(readPath) + `}`},
	}
	for i, text := range []string{inbox, log, src} {
		c.results = append(c.results, provenance.Source{Kind: provenance.Result, Tool: c.earlier[i].name, Msg: 3 + 2*i, Text: text})
	}
	body := "Hi Dana,\n\nthe staging migration itself finished without errors. The nightly export failed at 02:10 with " +
		"AccessDenied; the repository on ci-04 shows ten commits since Tuesday, none of them touching the export role, so " +
		"the role was most likely changed outside the repository. From the inbox: Lauri still needs the Leeds pallet figures " +
		"before Friday so that finance can close INV-2291 (EUR 48,310.00, due 15 December), and shipment HF-2026-004417 " +
		"will be delivered again on 27 November between 08:00 and 12:00. The shared drive is down on Saturday from 22:00.\n\n" +
		"I wrote the details to /srv/notes/2026-11-26.md.\n\nAtlas"
	c.calls = append([]benchCall{{"send_email", `{"to":["dana.okafor@halcyon-freight.example"],"subject":"Nightly export failure 26 November","body":` + jsonString(body) + `}`}}, c.calls...)
	if !dense {
		notes := "## Nightly export, 26 November\n\n- Staging migration: finished, no errors (Dana, 07:40).\n" +
			"- Export: AccessDenied at 02:10 on the reporting bucket.\n- Repository: last ten commits, see below; none touch the export role.\n\n" +
			"```\n" + log[:min(len(log), 900)] + "\n```\n\nThe clock package the export schedules with:\n\n```go\n" + src[:min(len(src), 700)] + "\n```\n"
		c.calls = append(c.calls, benchCall{"write_file", `{"path":"/srv/notes/2026-11-26.md","content":` + jsonString(notes) + `}`})
	}
	return c
}

func (c *conversation) sources() []provenance.Source {
	srcs := []provenance.Source{{Kind: provenance.System, Msg: 0, Text: c.system}, {Kind: provenance.User, Msg: 1, Text: c.user1}}
	srcs = append(srcs, c.results...)
	srcs = append(srcs, provenance.Source{Kind: provenance.User, Msg: 8, Text: c.user2})
	for _, d := range c.decls {
		name, _, _ := strings.Cut(d, " ")
		srcs = append(srcs, provenance.Source{Kind: provenance.Declaration, Msg: -1, Tool: name, Text: d})
	}
	return srcs
}

// size is the bytes of conversation and arguments the request holds.
func (c *conversation) size() int {
	n := len(c.system) + len(c.user1) + len(c.user2)
	for _, d := range c.decls {
		n += len(d)
	}
	for i := range c.earlier {
		n += len(c.earlier[i].args) + len(c.results[i].Text)
	}
	for _, call := range c.calls {
		n += len(call.args)
	}
	return n
}

// request is what one request pays: provenance over the conversation and
// every call's values, the credential rules over every call's values and,
// with conv, over every text of the conversation.
type request struct {
	c        *conversation
	prov     bool
	rules    bool
	conv     bool
	set      *secretrules.Set
	buf      []byte
	ts       []provenance.Trace
	texts    []string
	findings int
	seen     map[string]bool // the secrets found, when not nil
}

func (q *request) run() {
	c := q.c
	if q.prov {
		ix := provenance.New(c.sources())
		for _, calls := range [][]benchCall{c.earlier, c.calls} {
			for _, call := range calls {
				q.texts = q.texts[:0]
				for _, v := range toolcalls.Values(call.args) {
					q.texts = append(q.texts, v.Text)
				}
				if cap(q.ts) < len(q.texts) {
					q.ts = make([]provenance.Trace, len(q.texts))
				}
				ts := q.ts[:len(q.texts)]
				for i := range ts {
					ts[i] = provenance.Trace{Runs: ts[i].Runs[:0]}
				}
				ix.TraceAll(q.texts, ts)
			}
		}
	}
	if q.rules {
		count := func(_ secretrules.Match, text string) {
			q.findings++
			if q.seen != nil {
				q.seen[text] = true
			}
		}
		scan := func(text string) {
			z := q.set.NewStream(q.buf)
			z.Write([]byte(text), count)
			z.Close(count)
			q.buf = z.Buffer()
		}
		if q.conv {
			scan(c.system)
			scan(c.user1)
			scan(c.user2)
			for i := range c.results {
				scan(c.results[i].Text)
			}
		}
		for _, calls := range [][]benchCall{c.earlier, c.calls} {
			for _, call := range calls {
				for _, v := range toolcalls.Values(call.args) {
					scan(v.Text)
				}
			}
		}
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perKiB runs run in b's loop and reports, per KiB of total bytes,
// us/KiB (wall) and cpu-us/KiB (the process's CPU time, which a loaded
// machine's waits do not inflate).
func perKiB(b *testing.B, total int, run func()) {
	b.SetBytes(int64(total))
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		run()
	}
	kib := float64(total) / 1024
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000/kib, "us/KiB")
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N)/1000/kib, "cpu-us/KiB")
}

// BenchmarkRequestCost reports us/KiB (wall) and cpu-us/KiB (the
// process's CPU time, which a loaded machine's waits do not inflate) per
// KiB of conversation and arguments, for both parts together ("both")
// and each alone; "rules-conversation" is the credential rules over the
// arguments and every text of the conversation, which the gateway does
// not scan.
func BenchmarkRequestCost(b *testing.B) {
	set := secretrules.Default()
	for _, variant := range []string{"ordinary", "few", "dense"} {
		c := agentConversation(b, variant)
		for _, part := range []string{"both", "provenance", "rules", "rules-conversation"} {
			b.Run(variant+"/"+part, func(b *testing.B) {
				q := &request{c: &c, set: set, prov: part == "both" || part == "provenance",
					rules: part != "provenance", conv: part == "rules-conversation"}
				q.run() // warm the scratch buffers a gateway keeps
				perKiB(b, c.size(), q.run)
				b.ReportMetric(float64(c.size())/1024, "KiB")
			})
		}
	}
}

// TestRequestCostMaterial checks that the benchmark's material is what
// it claims: the credential rules find none in the ordinary conversation
// and nearly every key of the environment file in the others.
func TestRequestCostMaterial(t *testing.T) {
	for _, c := range []struct {
		variant string
		seed    uint64
		size    int
	}{{"ordinary", 0, 0}, {"few", 2, 1300}, {"dense", 1, len(readAgent(t, "clock.go.txt"))}} {
		conv := agentConversation(t, c.variant)
		q := &request{c: &conv, set: secretrules.Default(), rules: true, conv: true, seen: map[string]bool{}}
		q.run()
		if c.size == 0 {
			if q.findings != 0 {
				t.Errorf("%s conversation: %d credentials found", c.variant, q.findings)
			}
			continue
		}
		_, keys := envFile(rand.New(rand.NewPCG(35, c.seed)), c.size)
		missed := 0
		for _, k := range keys {
			// A rule's secret may carry the key's prefix ("key-...").
			if !q.seen[k] && !slices.ContainsFunc(slices.Collect(maps.Keys(q.seen)), func(s string) bool { return strings.Contains(s, k) }) {
				missed++
			}
		}
		// Left: database passwords with '#' or '%', which no rule's
		// secret may hold.
		if missed > len(keys)/10 {
			t.Errorf("%s conversation: %d of %d keys missed", c.variant, missed, len(keys))
		}
		t.Logf("%s: %d bytes, %d findings, %d of %d keys found", c.variant, conv.size(), q.findings, len(keys)-missed, len(keys))
	}
}

// request builds the request the gateway would be sent for c: the
// conversation as messages (each earlier call in an assistant message,
// its result in a tool message), the declarations as tools, and this
// turn's calls.
func (c *conversation) request() (*validator.Request, []validator.ToolCall) {
	req := &validator.Request{Messages: []validator.Message{{Role: "system", Content: c.system}, {Role: "user", Content: c.user1}}}
	for i, call := range c.earlier {
		id := fmt.Sprintf("call_%d", i)
		req.Messages = append(req.Messages,
			validator.Message{Role: "assistant", ToolCalls: []validator.ToolCall{{ID: id, Name: call.name, Arguments: call.args}}},
			validator.Message{Role: "tool", ToolCallID: id, Content: c.results[i].Text})
	}
	req.Messages = append(req.Messages, validator.Message{Role: "user", Content: c.user2})
	for _, d := range c.decls {
		name, rest, _ := strings.Cut(d, " ")
		at := strings.IndexByte(rest, '{')
		req.Tools = append(req.Tools, validator.Tool{Name: name, Description: strings.TrimSpace(rest[:at]), Parameters: json.RawMessage(rest[at:])})
	}
	var calls []validator.ToolCall
	for i, call := range c.calls {
		calls = append(calls, validator.ToolCall{Index: i, ID: fmt.Sprintf("call_%d", len(c.earlier)+i), Name: call.name, Arguments: call.args})
	}
	return req, calls
}

// BenchmarkGatewayCallCost is what the gateway runs on this turn's calls
// of BenchmarkRequestCost's conversations under the default policy, per
// KiB of conversation and arguments. Part "calls" is the policy's checks
// on the calls: the tool policy (its flow rule's provenance over the
// conversation, built when a call sends somewhere, the earlier turns'
// calls included, and the screen of every tool result with the embedded
// guard that tells a flagged result from a plain one), the leak check's
// credential rules over the arguments, and the rest. Part "input+calls"
// adds the input screening the gateway runs first (the embedded guard
// over the user's words and every tool result, default input policy).
// Part "screen" is the tool policy's screen of the tool results alone:
// "calls" less "screen" bounds what provenance and the credential rules
// cost on the gateway's path (with the policy's other checks in it).
// The gateway does not run the credential rules over the conversation it
// is sent, which BenchmarkRequestCost's rules-conversation part does as an upper
// bound. Every call is checked, also after one fails (as aegis check
// does).
func BenchmarkGatewayCallCost(b *testing.B) {
	pol := policy.DefaultFor(checks.Registry())
	g, err := guard.Default()
	if err != nil {
		b.Fatal(err)
	}
	input, err := g.InputCheck(guard.DefaultInputPolicy())
	if err != nil {
		b.Fatal(err)
	}
	for _, variant := range []string{"ordinary", "few", "dense"} {
		c := agentConversation(b, variant)
		req, calls := c.request()
		user := c.user1 + "\n" + c.user2 + "\n"
		for _, part := range []string{"calls", "screen", "input+calls"} {
			b.Run(variant+"/"+part, func(b *testing.B) {
				run := func() int {
					n := 0
					if part == "screen" {
						for _, res := range c.results {
							if bad, _ := g.SuspectToolResult(nil, res.Text, user); bad {
								n++
							}
						}
						return n
					}
					r := *req // the checks note what they worked out in it
					if part != "calls" {
						if v := input(context.Background(), &r); v != nil {
							n += len(v.Findings)
						}
					}
					a, err := pipeline.New(pol, &r, pipeline.Options{Complete: true})
					if err != nil {
						b.Fatal(err)
					}
					defer a.Stop()
					for _, call := range calls {
						a.ToolCall(call)
					}
					a.Close()
					return n + len(a.Findings())
				}
				b.Logf("%s/%s: %d findings", variant, part, run())
				perKiB(b, c.size(), func() { run() })
			})
		}
	}
}
