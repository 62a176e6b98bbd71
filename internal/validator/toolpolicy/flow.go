package toolpolicy

import (
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/provenance"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/leak"
)

// The flow rule: private data (the system prompt, what tools returned)
// may not go to a destination that an untrusted source chose (a tool
// result, a tool's declaration) or that nobody named. The user's own
// destinations, the system prompt's, the allow list's, addresses and hosts
// at a domain the user or the system prompt named (the company's own),
// and the sender of an e-mail the user asked to answer are trusted. A
// destination only an injected result named is refused whatever the call
// carries: the injection chose it.

const (
	// longRun is how many folded bytes of private text make a copy that
	// matters whatever they look like (three or four words).
	longRun = 20
	// keyRun is how many make one when they mix letters and digits, as
	// keys, passwords and account data do.
	keyRun = 8
	// maxSent caps the stretches remembered across the calls of a turn.
	maxSent = 4096
)

// sentRun is a stretch of a private source already sent to an untrusted
// destination by an earlier call of this turn or of the conversation.
type sentRun struct{ src, pos, end int }

// flowState is what the flow rule keeps for one attempt.
type flowState struct {
	ix         *provenance.Index
	replyAsked bool
	// heardUser: the request holds the user's words. Without them (an MCP
	// session, where the proxy sees calls and results only) a destination
	// nobody named is not refused for that alone.
	heardUser bool
	sent      []sentRun
	traces    []provenance.Trace
	// canaries are, per system-prompt source, the folded stretches of its
	// secret-looking tokens (leak.Canaries): what of the system prompt is
	// private however short the copy. The rest of it (opening hours, an
	// address, a phone number) is private only in long copies.
	canaries map[int][]span
}

// span is a stretch [pos, end) of a source's folded text.
type span struct{ pos, end int }

// replyRE finds a user asking to answer an e-mail or a message.
var replyRE = regexp.MustCompile(`(?i)\b(?:reply|replies|replying|answer|respond|write back|get back to)\b`)

// index builds the conversation's provenance index on first use, and
// takes in the calls the conversation's earlier turns made (their copies
// count towards a key split across turns).
func (v *Validator) index() *provenance.Index {
	if v.flow.ix != nil {
		return v.flow.ix
	}
	var srcs []provenance.Source
	var user strings.Builder
	for _, m := range v.req.Messages {
		if m.Role == "user" {
			user.WriteString(m.Content)
			user.WriteByte('\n')
		}
	}
	for i, m := range v.req.Messages {
		switch m.Role {
		case "user":
			srcs = append(srcs, provenance.Source{Kind: provenance.User, Msg: i, Text: m.Content})
		case "system", "developer":
			srcs = append(srcs, provenance.Source{Kind: provenance.System, Msg: i, Text: m.Content})
		case "tool", "function":
			s := provenance.Source{Kind: provenance.Result, Msg: i, Tool: v.req.ToolName(i), Text: m.Content}
			if v.screen != nil {
				if bad, why := v.screen(v.req, m.Content, user.String()); bad {
					s.Kind, s.Why = provenance.FlaggedResult, why
				}
			}
			srcs = append(srcs, s)
		}
	}
	for _, t := range v.req.Tools {
		srcs = append(srcs, provenance.Source{Kind: provenance.Declaration, Msg: -1, Tool: t.Name,
			Text: t.Name + "\n" + t.Description + "\n" + string(t.Parameters)})
	}
	v.flow.ix = provenance.New(srcs)
	v.flow.canaries = canarySpans(v.flow.ix, user.String())
	v.flow.replyAsked = replyRE.MatchString(user.String())
	v.flow.heardUser = user.Len() > 0
	v.takeInHistory()
	return v.flow.ix
}

// takeInHistory records what the earlier turns' calls sent where nobody
// trusted named: a key split across turns counts whole. Their values
// are traced together, in one pass over the conversation: a long
// session's request would otherwise read the conversation once per
// earlier call.
func (v *Validator) takeInHistory() {
	var texts []string
	for _, m := range v.req.Messages {
		if m.Role != "assistant" {
			continue
		}
		for _, c := range m.ToolCalls {
			if bad, _, vals := v.untrusted(c); bad != nil {
				for _, val := range vals {
					texts = append(texts, val.Text)
				}
			}
		}
	}
	if len(texts) == 0 {
		return
	}
	traces := v.traces(len(texts))
	v.flow.ix.TraceAll(texts, traces)
	for _, t := range traces {
		for _, r := range t.Runs {
			if len(v.flow.sent) < maxSent {
				v.flow.sent = append(v.flow.sent, sentRun{r.Src, r.Pos, r.Pos + r.Len})
			}
		}
	}
}

// canarySpans marks, in each system-prompt source, where its canaries
// stand (every occurrence, up to 64 a source).
func canarySpans(ix *provenance.Index, user string) map[int][]span {
	var out map[int][]span
	for i, s := range ix.Sources {
		if s.Kind != provenance.System {
			continue
		}
		for _, c := range leak.Canaries(s.Text, user) {
			if strings.HasPrefix(c, "\x00") {
				continue // an encoded form: provenance decodes copies itself
			}
			for from := 0; len(out[i]) < 64; {
				pos, n := ix.Locate(i, from, c)
				if pos < 0 || n < provenance.Gram {
					break
				}
				if out == nil {
					out = map[int][]span{}
				}
				out[i] = append(out[i], span{pos, pos + n})
				from = pos + n
			}
		}
	}
	return out
}

// private reports whether the folded stretch [lo, hi) of source src,
// copied into a call, is private data that matters: a long copy of any
// private source, a system-prompt canary (most of it, or all of a short
// one), or a stretch of a tool result that mixes letters and digits as
// keys and account data do.
func (v *Validator) private(ix *provenance.Index, src, lo, hi int) bool {
	n := hi - lo
	if n >= longRun {
		return true
	}
	if ix.Sources[src].Kind != provenance.System {
		return n >= keyRun && ix.Secretlike(src, lo, n)
	}
	for _, c := range v.flow.canaries[src] {
		if over := min(hi, c.end) - max(lo, c.pos); over > 0 && over >= min(c.end-c.pos, keyRun) {
			return true
		}
	}
	return false
}

// origin is what the flow rule makes of a destination.
type origin struct {
	trusted bool
	kind    provenance.Kind // who named it: Nowhere, Result, FlaggedResult or Declaration
	src     int             // the source that named it, or -1
}

// names returns what may name d: the value, and for a host its parent
// domains of at least two labels.
func names(d destination) []string {
	out := []string{d.value}
	if !d.host {
		return out
	}
	h := d.value
	for {
		i := strings.IndexByte(h, '.')
		if i < 0 || strings.Count(h[i+1:], ".") < 1 {
			return out
		}
		h = h[i+1:]
		out = append(out, h)
	}
}

func (v *Validator) judge(d destination) origin {
	if allowed(v.cfg.Egress.Allow, d) {
		return origin{trusted: true}
	}
	ix := v.index()
	o := origin{kind: provenance.Nowhere, src: -1}
	note := func(m provenance.Mask, src int) bool {
		if m.Has(provenance.User) || m.Has(provenance.System) {
			return true
		}
		if src < 0 {
			return false
		}
		k := ix.Sources[src].Kind
		if o.src < 0 || k == provenance.FlaggedResult && o.kind != provenance.FlaggedResult {
			o.kind, o.src = k, src
		}
		return false
	}
	for _, n := range names(d) {
		if note(ix.Named(n)) {
			return origin{trusted: true}
		}
	}
	if !d.host && strings.IndexByte(d.value, '@') < 0 {
		// An account, an IBAN, a wallet or a phone number: named however
		// it is spaced or dashed, and a phone number by its last nine
		// digits (the country code or trunk zero written or not).
		if note(ix.NamedFold(d.value)) {
			return origin{trusted: true}
		}
		if tail, ok := phoneTail(d.value); ok && note(ix.NamedFold(tail)) {
			return origin{trusted: true}
		}
	}
	if at := strings.LastIndexByte(d.value, '@'); at > 0 {
		// A colleague: an address at a domain the user or the system
		// prompt named.
		if m, _ := ix.Named(d.value[at:]); m.Has(provenance.User) || m.Has(provenance.System) {
			return origin{trusted: true}
		}
		if m, _ := ix.Named(d.value[at+1:]); m.Has(provenance.System) {
			return origin{trusted: true}
		}
		if v.flow.replyAsked && v.isSender(d.value) {
			return origin{trusted: true}
		}
	}
	return o
}

// isSender reports whether addr is the sender (From or Reply-To) of an
// e-mail in a tool result that was not flagged.
func (v *Validator) isSender(addr string) bool {
	ix := v.flow.ix
	for i := range ix.Sources {
		if ix.Sources[i].Kind != provenance.Result {
			continue
		}
		text := ix.Lower(i)
		for off := 0; ; {
			j := strings.Index(text[off:], addr)
			if j < 0 {
				break
			}
			at := off + j
			line := text[strings.LastIndexByte(text[:at], '\n')+1 : at]
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "from:") || strings.HasPrefix(line, "reply-to:") || strings.HasPrefix(line, "sender:") {
				return true
			}
			off = at + len(addr)
		}
	}
	return false
}

// carried is the private data a call carries in one value.
type carried struct {
	path string
	n    int
	kind provenance.Kind
	src  int
	via  provenance.Encoding
}

// untrusted returns the destination of call that the flow rule judges
// it by, nil when the call sends nowhere or only where someone trusted
// named, with who named it and the values that may carry data there
// (all but the destinations the conversation names whole).
func (v *Validator) untrusted(call validator.ToolCall) (*destination, origin, []toolcalls.Value) {
	kind := v.kind(call.Name)
	var ds []destination
	if kind.egress {
		ds = destinations(toolcalls.Of(call).Values)
	}
	if kind.shell {
		ds = append(ds, shellDestinations(toolcalls.Of(call).Values)...)
	}
	if len(ds) == 0 {
		return nil, origin{}, nil
	}
	var bad *destination
	var from origin
	for i := range ds {
		o := v.judge(ds[i])
		if o.trusted {
			continue
		}
		if bad == nil || o.kind == provenance.FlaggedResult && from.kind != provenance.FlaggedResult {
			bad, from = &ds[i], o
		}
	}
	if bad == nil {
		return nil, origin{}, nil
	}
	var vals []toolcalls.Value
	for _, val := range toolcalls.Of(call).Values {
		if !v.isReference(val, ds) {
			vals = append(vals, val)
		}
	}
	return bad, from, vals
}

// judgeFlow applies the flow rule to a call of this turn.
func (v *Validator) judgeFlow(call validator.ToolCall, base string) []validator.Finding {
	kind := v.kind(call.Name)
	bad, from, vals := v.untrusted(call)
	if bad == nil {
		return nil
	}
	ix := v.index()
	var best carried
	total := 0
	texts := make([]string, len(vals))
	for i, val := range vals {
		texts[i] = val.Text
	}
	traces := v.traces(len(vals))
	ix.TraceAll(texts, traces)
	for i, val := range vals {
		c := v.carries(ix, val, &traces[i])
		total += c.n
		if c.n > best.n {
			best = c
		}
	}
	f := validator.Finding{Check: Name, Path: base + "/arguments/" + bad.path, Start: bad.start, End: bad.end}
	dest := describeOrigin(ix, from) + " (" + paramName(bad.path) + ")"
	switch {
	case from.kind == provenance.FlaggedResult:
		f.Reason = validator.ReasonPromptInjection
		if best.n > 0 {
			f.Message = "call to " + quote(call.Name) + ": " + describeCarried(ix, best, total) + " to " + dest
		} else {
			f.Message = "call to " + quote(call.Name) + " sends to " + dest
		}
		if why := ix.Sources[from.src].Why; why != "" {
			f.Message += ", and that result looks injected (" + why + ")"
		}
	case best.n > 0:
		f.Reason = validator.ReasonDataExfiltration
		f.Message = "call to " + quote(call.Name) + ": " + describeCarried(ix, best, total) + " to " + dest
	case from.kind != provenance.Nowhere && isPayment(call):
		// Money goes where a tool result or a declaration said, flagged
		// as injected or not: a payment's recipient is the user's to give.
		f.Reason = validator.ReasonDataExfiltration
		f.Message = "call to " + quote(call.Name) + " pays " + dest + "; a payment's recipient must come from the user or the system prompt"
	case from.kind == provenance.Nowhere && kind.egress && !isRead(call) && v.flow.heardUser:
		// A send to a destination the model made up: whatever it
		// carries, nobody asked for it to go there.
		f.Reason = validator.ReasonDataExfiltration
		f.Message = "call to " + quote(call.Name) + " sends to " + dest
	default:
		return nil
	}
	if from.kind == provenance.Nowhere {
		// A made-up destination after an injected result: the injection
		// most likely chose it.
		for i, s := range ix.Sources {
			if s.Kind == provenance.FlaggedResult {
				f.Reason = validator.ReasonPromptInjection
				f.Message += ", after " + describeSource(ix, i) + " that looks injected (" + s.Why + ")"
				break
			}
		}
	}
	return []validator.Finding{f}
}

// payWords are tool-name words of calls that move money.
var payWords = map[string]bool{
	"pay": true, "payment": true, "payments": true, "payout": true, "payouts": true, "wire": true, "remit": true,
	"tip": true, "donate": true, "donation": true, "sepa": true, "refund": true, "crypto": true, "btc": true,
	"eth": true, "money": true, "funds": true, "transaction": true, "transactions": true, "venmo": true,
	"paypal": true, "zelle": true, "iban": true,
}

// isPayment reports whether a call moves money: a tool named for it
// (make_payment, wire_funds, transfer_money, create_payout) or an amount
// among its arguments.
func isPayment(call validator.ToolCall) bool {
	for _, w := range nameTokens(call.Name) {
		if payWords[w] {
			return true
		}
	}
	for _, val := range toolcalls.Values(call.Arguments) {
		for _, w := range nameTokens(lastSegment(val.Path)) {
			if w == "amount" || w == "sats" || w == "satoshis" || w == "lamports" || w == "wei" {
				return true
			}
		}
	}
	return false
}

// lastSegment is a value path's last segment that is not an array index.
func lastSegment(path string) string {
	segs := strings.Split(path, "/")
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i] != "" && !isIndex(segs[i]) {
			return segs[i]
		}
	}
	return ""
}

// phoneTail returns the last nine digits of a value written as a phone
// number (digits, spaces, '+', '-', '.', parentheses; nine to fifteen
// digits).
func phoneTail(s string) (string, bool) {
	digits := make([]byte, 0, 16)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c):
			digits = append(digits, c)
		case c == ' ' || c == '+' || c == '-' || c == '.' || c == '(' || c == ')':
		default:
			return "", false
		}
	}
	if len(digits) < 9 || len(digits) > 15 {
		return "", false
	}
	return string(digits[len(digits)-9:]), true
}

// readNames are tool-name words of calls that fetch rather than send.
var readNames = map[string]bool{
	"get": true, "read": true, "fetch": true, "browse": true, "download": true, "webpage": true, "open": true,
	"visit": true, "search": true, "lookup": true, "load": true, "view": true, "scrape": true, "crawl": true,
}

// isRead reports whether a call reads rather than sends: an HTTP method
// argument of GET or HEAD, or, with none, a tool named for fetching
// (fetch_url, get_webpage, browse) and for nothing that sends. A read
// carries out only what its URL holds, which the flow rule traces.
func isRead(call validator.ToolCall) bool {
	for _, val := range toolcalls.Of(call).Values {
		if strings.EqualFold(val.Path, "method") {
			m := strings.ToUpper(strings.TrimSpace(val.Text))
			return m == "GET" || m == "HEAD"
		}
	}
	read := false
	for _, w := range nameTokens(call.Name) {
		switch {
		case readNames[w]:
			read = true
		case sendWords[w] && w != "fetch" && w != "browse" && w != "webpage" && w != "download" && w != "http" && w != "https" && w != "request":
			return false
		}
	}
	return read
}

// isReference reports whether val is a destination the conversation
// names whole (a link a search returned): fetching it carries nothing.
func (v *Validator) isReference(val toolcalls.Value, ds []destination) bool {
	for _, d := range ds {
		if d.path != val.Path {
			continue
		}
		t := strings.ToLower(strings.TrimSpace(val.Text))
		if len(t) < 4 {
			return false
		}
		m, _ := v.flow.ix.Named(t)
		return m != 0
	}
	return false
}

// traces returns n emptied traces, reusing the last call's.
func (v *Validator) traces(n int) []provenance.Trace {
	ts := v.flow.traces
	if cap(ts) < n {
		ts = make([]provenance.Trace, n)
	}
	ts = ts[:n]
	for i := range ts {
		ts[i] = provenance.Trace{Runs: ts[i].Runs[:0]}
	}
	v.flow.traces = ts
	return ts
}

// carries takes a value's trace and returns the private data it carries,
// counting stretches that continue what earlier calls sent.
func (v *Validator) carries(ix *provenance.Index, val toolcalls.Value, t *provenance.Trace) carried {
	if len(t.Runs) == 0 {
		return carried{}
	}
	start := len(v.flow.sent)
	for _, r := range t.Runs {
		if len(v.flow.sent) < maxSent {
			v.flow.sent = append(v.flow.sent, sentRun{r.Src, r.Pos, r.Pos + r.Len})
		}
	}
	// The significant stretches this value adds: its runs, each grown by
	// what earlier values and calls sent next to it.
	var sig []sentRun
	var via provenance.Encoding
	for i, r := range t.Runs {
		lo, hi := r.Pos, r.Pos+r.Len
		for grown := true; grown; {
			grown = false
			for j, s := range v.flow.sent {
				if j == start+i || s.src != r.Src || s.pos > hi || s.end < lo {
					continue
				}
				if s.pos < lo || s.end > hi {
					lo, hi, grown = min(lo, s.pos), max(hi, s.end), true
				}
			}
		}
		if v.private(ix, r.Src, lo, hi) {
			sig = append(sig, sentRun{r.Src, r.Pos, r.Pos + r.Len})
			if len(sig) == 1 || r.Via != provenance.Plain {
				via = r.Via
			}
		}
	}
	if len(sig) == 0 {
		return carried{}
	}
	sort.Slice(sig, func(i, j int) bool {
		if sig[i].src != sig[j].src {
			return sig[i].src < sig[j].src
		}
		return sig[i].pos < sig[j].pos
	})
	// The union of the stretches, and the source that gave most.
	n, most, mostN := 0, sig[0].src, 0
	cur := sig[0]
	perSrc := map[int]int{}
	flush := func() {
		n += cur.end - cur.pos
		perSrc[cur.src] += cur.end - cur.pos
		if perSrc[cur.src] > mostN {
			most, mostN = cur.src, perSrc[cur.src]
		}
	}
	for _, s := range sig[1:] {
		if s.src == cur.src && s.pos <= cur.end {
			cur.end = max(cur.end, s.end)
			continue
		}
		flush()
		cur = s
	}
	flush()
	return carried{path: val.Path, n: n, kind: ix.Sources[most].Kind, src: most, via: via}
}

// describeOrigin names who chose a destination, without naming it.
func describeOrigin(ix *provenance.Index, o origin) string {
	switch o.kind {
	case provenance.Result, provenance.FlaggedResult:
		return "a destination only " + describeSource(ix, o.src) + " named"
	case provenance.Declaration:
		return "a destination only the declaration of tool " + quote(ix.Sources[o.src].Tool) + " named"
	}
	return "a destination nobody in the conversation named"
}

// describeSource names a source by its kind, tool and message.
func describeSource(ix *provenance.Index, i int) string {
	s := ix.Sources[i]
	switch s.Kind {
	case provenance.Result, provenance.FlaggedResult:
		if s.Tool != "" {
			return "the result of " + quote(s.Tool) + " (message " + strconv.Itoa(s.Msg) + ")"
		}
		return "the tool result of message " + strconv.Itoa(s.Msg)
	}
	return s.Kind.String()
}

// describeCarried says what a call carries: "`body` carries 31 bytes of
// the system prompt (hex-encoded)".
func describeCarried(ix *provenance.Index, c carried, total int) string {
	s := paramName(c.path) + " carries " + strconv.Itoa(c.n) + " bytes of " + describeSource(ix, c.src)
	if c.via != provenance.Plain {
		s += " (" + c.via.String() + ")"
	}
	if total > c.n {
		s += ", the call " + strconv.Itoa(total) + " bytes of private data in all"
	}
	return s
}

// paramName names an argument path for a message.
func paramName(path string) string {
	if path == "" {
		return "the arguments"
	}
	return "`" + path + "`"
}

// netCommands are commands whose host arguments are contacted.
var netCommands = map[string]bool{
	"dig": true, "nslookup": true, "host": true, "drill": true, "ping": true, "ping6": true, "curl": true,
	"wget": true, "nc": true, "ncat": true, "netcat": true, "ssh": true, "scp": true, "sftp": true,
	"telnet": true, "ftp": true, "rsync": true, "traceroute": true, "whois": true, "socat": true, "http": true,
}

var hostRE = regexp.MustCompile(`(?i)^(?:[a-z0-9_-]+\.)+[a-z]{2,}$`)

// shellDestinations returns the hosts a command contacts: every URL's,
// and the host arguments of network commands (dig, nslookup, curl, ssh,
// ...), where a DNS lookup of a made-up subdomain carries data out.
func shellDestinations(vals []toolcalls.Value) []destination {
	var out []destination
	for _, val := range commandText(vals) {
		text := val.Text
		for _, m := range findAll(urlRE, text, strings.Contains(text, "://")) {
			if h := urlHost(text[m[0]:m[1]]); h != "" {
				i := strings.Index(strings.ToLower(text[m[0]:m[1]]), h)
				out = append(out, destination{path: val.Path, value: h, start: m[0] + max(i, 0), end: m[0] + max(i, 0) + len(h), host: true})
			}
		}
		net := false
		for i := 0; i < len(text); {
			for i < len(text) && isShellSpace(text[i]) {
				if text[i] == ';' || text[i] == '|' || text[i] == '&' || text[i] == '\n' {
					net = false
				}
				i++
			}
			j := i
			for j < len(text) && !isShellSpace(text[j]) {
				j++
			}
			if j == i {
				break
			}
			tok := strings.Trim(text[i:j], `"'`)
			base := tok[strings.LastIndexByte(tok, '/')+1:]
			switch {
			case netCommands[strings.ToLower(base)]:
				net = true
			case net && !strings.Contains(tok, "://"):
				h := tok
				if k := strings.LastIndexByte(h, '@'); k >= 0 {
					h = h[k+1:]
				}
				if k := strings.IndexByte(h, ':'); k >= 0 {
					h = h[:k]
				}
				if hostRE.MatchString(h) {
					k := strings.Index(text[i:j], h)
					out = append(out, destination{path: val.Path, value: strings.ToLower(h), start: i + max(k, 0), end: i + max(k, 0) + len(h), host: true})
				}
			}
			i = j
		}
	}
	return out
}

func isShellSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '|' || c == '&' || c == '(' || c == ')' || c == '`'
}
