package toolpolicy

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// nameTokens splits a tool or parameter name into lower-case words at
// '_', '-', '.', '/', spaces and camelCase humps.
func nameTokens(s string) []string {
	var out []string
	var cur strings.Builder
	prevLower := false
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	for _, r := range s {
		switch {
		case r == '_' || r == '-' || r == '.' || r == '/' || r == ' ' || r == ':':
			flush()
			prevLower = false
		case unicode.IsUpper(r):
			if prevLower {
				flush()
			}
			cur.WriteRune(unicode.ToLower(r))
			prevLower = false
		default:
			cur.WriteRune(r)
			prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
		}
	}
	flush()
	return out
}

// sendWords are name words of tools that send something out.
var sendWords = map[string]bool{
	"send": true, "post": true, "upload": true, "transfer": true, "pay": true, "payment": true, "wire": true,
	"forward": true, "share": true, "publish": true, "invite": true, "submit": true, "email": true, "mail": true,
	"sms": true, "notify": true, "webhook": true, "http": true, "https": true, "request": true, "curl": true,
	"tweet": true, "reply": true, "dm": true, "transaction": true, "remit": true, "deposit": true, "withdraw": true,
	"message": true, "fetch": true, "browse": true, "webpage": true, "download": true,
}

// readWords open the names of tools that only read.
var readWords = map[string]bool{
	"get": true, "read": true, "list": true, "search": true, "find": true, "lookup": true, "query": true,
	"check": true, "view": true, "show": true, "count": true, "describe": true,
}

// destWords are parameter names that hold a destination.
var destWords = map[string]bool{
	"to": true, "recipient": true, "recipients": true, "cc": true, "bcc": true, "email": true, "emails": true,
	"url": true, "uri": true, "endpoint": true, "webhook": true, "iban": true, "account": true,
	"destination": true, "dest": true, "phone": true, "receiver": true, "payee": true, "host": true,
	"link": true, "participants": true, "target": true, "number": true,
}

// isDestParam: a parameter named like a destination ("to", "user_email",
// "webhookUrl", "recipient_iban", "account_number"), judged by its last
// word and, for "number", "target" and "address", the word before it.
func isDestParam(name string) bool {
	ws := nameTokens(name)
	if len(ws) == 0 {
		return false
	}
	last := ws[len(ws)-1]
	switch last {
	case "number", "target", "address":
		if len(ws) < 2 {
			return false
		}
		prev := ws[len(ws)-2]
		return destWords[prev] || prev == "mail" || prev == "wallet" || prev == "ip"
	}
	return destWords[last]
}

// urlWords are parameters that name a place to fetch from or send to.
var urlWords = map[string]bool{"url": true, "uri": true, "link": true, "endpoint": true, "webhook": true, "host": true}

// isEgress recognises a tool that sends something out, by its name (a
// sending word, not opened by a reading one) or its parameters (one named
// like a destination; for a tool whose name opens with a reading word,
// only a URL: fetching a URL carries data out in it).
func isEgress(name string, t *validator.Tool) bool {
	ws := nameTokens(name)
	reads := len(ws) > 0 && readWords[ws[0]]
	if !reads {
		for _, w := range ws {
			if sendWords[w] {
				return true
			}
		}
	}
	if t == nil {
		return false
	}
	for _, p := range paramNames(t.Parameters) {
		if !isDestParam(p) {
			continue
		}
		pw := nameTokens(p)
		if !reads || urlWords[pw[len(pw)-1]] {
			return true
		}
	}
	return false
}

// paramNames returns the top-level property names of a parameters schema.
func paramNames(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return nil
	}
	out := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		out = append(out, k)
	}
	return out
}

var (
	emailRE = regexp.MustCompile(`(?i)[a-z0-9][a-z0-9._%+-]*@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}`)
	urlRE   = regexp.MustCompile(`(?i)\b(?:https?|ftp|wss?)://[^\s<>"'\x60)\]]+`)
	ibanRE  = regexp.MustCompile(`\b[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}\b`)
)

// destination is one place a call sends to.
type destination struct {
	path       string // value path in the arguments
	value      string // what must be named (an address, a host, an account)
	start, end int    // where in the value
	host       bool   // value is a URL host
}

// destinations returns what an egress call sends to: in each value under a
// destination-like parameter, the e-mail addresses, URL hosts and IBANs, or
// the whole value when it holds none of those.
func destinations(args string) []destination {
	var out []destination
	for _, v := range toolcalls.Values(args) {
		if !destPath(v.Path) {
			continue
		}
		text := v.Text
		n := len(out)
		// Each pattern runs only where its fixed part appears ("://", "@",
		// two capitals and two digits): most values hold none, and a
		// regular expression costs more to start than the scan.
		hasURL := strings.Contains(text, "://")
		for _, m := range findAll(urlRE, text, hasURL) {
			if u, err := url.Parse(text[m[0]:m[1]]); err == nil && u.Hostname() != "" {
				h := strings.ToLower(u.Hostname())
				i := strings.Index(strings.ToLower(text[m[0]:m[1]]), h)
				out = append(out, destination{path: v.Path, value: h, start: m[0] + max(i, 0), end: m[0] + max(i, 0) + len(h), host: true})
			}
		}
		for _, m := range findAll(emailRE, text, strings.IndexByte(text, '@') >= 0) {
			if hasURL && inURL(text, m[0]) {
				continue
			}
			out = append(out, destination{path: v.Path, value: strings.ToLower(text[m[0]:m[1]]), start: m[0], end: m[1]})
		}
		for _, m := range findAll(ibanRE, text, mayHoldIBAN(text)) {
			out = append(out, destination{path: v.Path, value: strings.ToLower(text[m[0]:m[1]]), start: m[0], end: m[1]})
		}
		if len(out) == n {
			t := strings.TrimSpace(text)
			if len(t) > 2 {
				i := strings.Index(text, t)
				out = append(out, destination{path: v.Path, value: strings.ToLower(t), start: i, end: i + len(t)})
			}
		}
	}
	return out
}

// findAll returns re's first 16 matches in text, or none when may is false.
func findAll(re *regexp.Regexp, text string, may bool) [][]int {
	if !may {
		return nil
	}
	return re.FindAllStringIndex(text, 16)
}

// mayHoldIBAN reports whether text has what every IBAN begins with: two
// capital letters and two digits.
func mayHoldIBAN(text string) bool {
	for i := 0; i+3 < len(text); i++ {
		if isUpper(text[i]) && isUpper(text[i+1]) && isDigit(text[i+2]) && isDigit(text[i+3]) {
			return true
		}
	}
	return false
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func inURL(text string, at int) bool {
	for _, m := range urlRE.FindAllStringIndex(text, 16) {
		if at >= m[0] && at < m[1] {
			return true
		}
	}
	return false
}

// destPath: the value's parameter (the last path segment that is not an
// array index) is named like a destination.
func destPath(path string) bool {
	segs := strings.Split(path, "/")
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i] == "" || isIndex(segs[i]) {
			continue
		}
		return isDestParam(segs[i])
	}
	return false
}

func isIndex(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// result is one tool result of the conversation.
type result struct {
	index  int // message index
	tool   string
	callID string
	text   string // lower-cased
	why    string // why it was flagged ("" when it was not)
}

// trust is what the conversation names, in lower case.
type trust struct {
	named   []string // user, system and developer messages, tool declarations
	clean   []result // tool results not flagged
	flagged []result
}

func (v *Validator) buildTrust() *trust {
	t := &trust{}
	var user strings.Builder
	for _, m := range v.req.Messages {
		if m.Role == "user" {
			user.WriteString(m.Content)
			user.WriteByte('\n')
		}
	}
	for i, m := range v.req.Messages {
		switch m.Role {
		case "user", "system", "developer":
			t.named = append(t.named, strings.ToLower(m.Content))
		case "tool", "function":
			r := result{index: i, tool: v.req.ToolName(i), callID: m.ToolCallID, text: strings.ToLower(m.Content)}
			if v.screen != nil {
				if bad, why := v.screen(m.Content, user.String()); bad {
					r.why = why
					t.flagged = append(t.flagged, r)
					continue
				}
			}
			t.clean = append(t.clean, r)
		}
	}
	for _, tool := range v.req.Tools {
		t.named = append(t.named, strings.ToLower(tool.Name+"\n"+tool.Description+"\n"+string(tool.Parameters)))
	}
	return t
}

// mentions reports whether text names d: the value itself, or for a host
// a parent domain of at least two labels.
func mentions(text string, d destination) bool {
	if strings.Contains(text, d.value) {
		return true
	}
	if !d.host {
		return false
	}
	h := d.value
	for {
		i := strings.IndexByte(h, '.')
		if i < 0 || strings.Count(h[i+1:], ".") < 1 {
			return false
		}
		h = h[i+1:]
		if strings.Contains(text, h) {
			return true
		}
	}
}

// allowed reports whether the allow list covers d: the value, or its
// domain (an address's, a host's parent).
func allowed(list []string, d destination) bool {
	for _, a := range list {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == "" {
			continue
		}
		a = strings.TrimPrefix(a, "@")
		if d.value == a {
			return true
		}
		dom := d.value
		if i := strings.LastIndexByte(dom, '@'); i >= 0 {
			dom = dom[i+1:]
		}
		if dom == a || strings.HasSuffix(dom, "."+a) {
			return true
		}
	}
	return false
}

func (v *Validator) checkEgress(call validator.ToolCall, base string) []validator.Finding {
	ds := destinations(call.Arguments)
	if len(ds) == 0 {
		return nil
	}
	if v.trust == nil {
		v.trust = v.buildTrust()
	}
	t := v.trust
	var out []validator.Finding
	for _, d := range ds {
		if allowed(v.cfg.Egress.Allow, d) {
			continue
		}
		named := false
		for _, s := range t.named {
			if mentions(s, d) {
				named = true
				break
			}
		}
		if named {
			continue
		}
		f := validator.Finding{Check: Name, Path: base + "/arguments/" + d.path, Start: d.start, End: d.end}
		var from *result
		for i := range t.flagged {
			if mentions(t.flagged[i].text, d) {
				from = &t.flagged[i]
				break
			}
		}
		clean := false
		for _, r := range t.clean {
			if mentions(r.text, d) {
				clean = true
				break
			}
		}
		switch {
		case from != nil:
			f.Reason = validator.ReasonPromptInjection
			f.Message = "call to " + quote(call.Name) + " sends to " + quote(d.value) + ", which only " + describe(*from) + " named, and that result looks injected (" + from.why + ")"
		case clean:
			continue
		case len(t.flagged) > 0:
			f.Reason = validator.ReasonPromptInjection
			f.Message = "call to " + quote(call.Name) + " sends to " + quote(d.value) + ", which nobody in the conversation named, after " + describe(t.flagged[0]) + " that looks injected (" + t.flagged[0].why + ")"
		default:
			f.Reason = validator.ReasonMalformedToolCall
			f.Message = "call to " + quote(call.Name) + " sends to " + quote(d.value) + ", which the user, the system prompt, the tool declarations, the allow list and the tool results never named; send only to destinations the conversation names"
		}
		out = append(out, f)
	}
	return out
}

func describe(r result) string {
	s := "the tool result of message " + itoa(r.index)
	if r.tool != "" {
		s = "the result of tool " + quote(r.tool)
	}
	if r.callID != "" {
		s += " (call " + r.callID + ")"
	}
	return s
}

func quote(s string) string { return strconv.Quote(s) }

func itoa(i int) string { return strconv.Itoa(i) }
