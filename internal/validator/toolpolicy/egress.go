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
	"link": true, "participants": true, "target": true, "number": true, "wallet": true, "beneficiary": true,
	"creditor": true,
}

// isDestParam: a parameter named like a destination ("to", "user_email",
// "webhookUrl", "recipient_iban", "account_number"), judged by its last
// word and, for "number", "target" and "address", the word before it.
func isDestParam(name string) bool {
	ws := nameTokens(name)
	if len(ws) == 0 {
		return false
	}
	if ws[0] == "from" || ws[0] == "source" || ws[0] == "sender" || ws[0] == "src" {
		return false // where it comes from: the user's own account
	}
	last := ws[len(ws)-1]
	switch last {
	case "number", "target", "address", "id", "value", "handle":
		if len(ws) < 2 {
			return false
		}
		prev := ws[len(ws)-2]
		return destWords[prev] || prev == "mail" || prev == "wallet" || prev == "ip" || prev == "creditor" || prev == "beneficiary"
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
			if sendWords[w] || payWords[w] {
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
func destinations(vals []toolcalls.Value) []destination {
	var out []destination
	for _, v := range vals {
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
// array index) is named like a destination, read with the segment above
// it when it alone says too little ("wallet/address", "to/number",
// "recipient/id").
func destPath(path string) bool {
	segs := strings.Split(path, "/")
	last := -1
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i] == "" || isIndex(segs[i]) {
			continue
		}
		if last >= 0 {
			return isDestParam(segs[i] + "_" + segs[last])
		}
		if isDestParam(segs[i]) {
			return true
		}
		last = i
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

// urlHost returns a URL's host in lower case, or "".
func urlHost(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.ToLower(p.Hostname())
}

// quote puts a tool name in backticks for a message (strconv.Quote when
// it holds a backtick or a control character).
func quote(s string) string {
	for _, r := range s {
		if r == '`' || r < ' ' || r == 0x7f {
			return strconv.Quote(s)
		}
	}
	return "`" + s + "`"
}
