package toolpolicy

import (
	"strconv"

	"github.com/aegis-sentinel/aegis/internal/mdimage"
	"github.com/aegis-sentinel/aegis/internal/provenance"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// A markdown image in the answer (![alt](URL)) is fetched by the client
// that renders it: its URL is a destination like a tool call's, and what
// the URL carries leaves with the fetch. The flow rule follows the image
// syntax through the answer (package mdimage), holds the answer from the
// '!' until the URL ends, and judges the URL as it judges a call's.

// image is the answer's markdown image in progress and the findings of
// those judged.
type image struct {
	scan  mdimage.Scanner
	finds []validator.Finding
}

// images follows the image syntax through p, whose first byte is at
// offset at, and judges each URL that ends there.
func (v *Validator) images(p []byte, at int) {
	for len(p) > 0 {
		n, img, ok := v.img.scan.Scan(p, at)
		if ok {
			v.endImage(img)
		}
		p, at = p[n:], at+n
	}
}

// endImage judges the URL of the image that just ended.
func (v *Validator) endImage(img mdimage.Image) {
	im := &v.img
	if !v.cfg.Egress.Enabled {
		return
	}
	u := string(img.URL)
	host := urlHost(u)
	if host == "" {
		return
	}
	d := destination{value: host, host: true}
	o := v.judge(d)
	if o.trusted {
		return
	}
	ix := v.index()
	val := toolcalls.Value{Text: u}
	if m, _ := ix.Named(lowerASCII(u)); m != 0 {
		return // an image the conversation gave whole
	}
	ts := v.traces(1)
	ix.TraceAll([]string{val.Text}, ts)
	c := v.carries(ix, val, &ts[0])
	if c.n == 0 {
		return
	}
	f := validator.Finding{Check: Name, Reason: validator.ReasonDataExfiltration, Start: img.Start, End: img.End,
		Message: "a markdown image in the answer carries " + strconv.Itoa(c.n) + " bytes of " + describeSource(ix, c.src)}
	if c.via != provenance.Plain {
		f.Message += " (" + c.via.String() + ")"
	}
	f.Message += " in its URL to " + describeOrigin(ix, o) + "; rendering the image sends them"
	if o.kind == provenance.FlaggedResult {
		f.Reason = validator.ReasonPromptInjection
		if why := ix.Sources[o.src].Why; why != "" {
			f.Message += ", and that result looks injected (" + why + ")"
		}
	}
	im.finds = append(im.finds, f)
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}
