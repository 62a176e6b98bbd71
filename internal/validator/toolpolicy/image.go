package toolpolicy

import (
	"bytes"
	"strconv"

	"github.com/aegis-sentinel/aegis/internal/provenance"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// A markdown image in the answer (![alt](URL)) is fetched by the client
// that renders it: its URL is a destination like a tool call's, and what
// the URL carries leaves with the fetch. The flow rule follows the image
// syntax byte by byte through the answer, holds the answer from the '!'
// until the URL ends, and judges the URL as it judges a call's.

const (
	maxImageURL = 2048
	maxImageAlt = 256
)

type imageState uint8

const (
	imgNone  imageState = iota
	imgBang             // read "!"
	imgAlt              // inside "[...]"
	imgClose            // read "]"
	imgURL              // inside "(...)"
)

// image is the answer's markdown image in progress.
type image struct {
	state    imageState
	start    int // offset of the '!'
	urlStart int
	alt      int
	buf      []byte
	finds    []validator.Finding
}

// images follows the image syntax through p, whose first byte is at
// offset at. Outside an image only a '!' can begin one.
func (v *Validator) images(p []byte, at int) {
	im := &v.img
	for i := 0; i < len(p); i++ {
		if im.state == imgNone {
			j := bytes.IndexByte(p[i:], '!')
			if j < 0 {
				return
			}
			i += j
		}
		v.imageByte(p[i], at+i)
	}
}

func (v *Validator) imageByte(c byte, at int) {
	im := &v.img
	switch im.state {
	case imgNone:
		if c == '!' {
			im.state, im.start = imgBang, at
		}
	case imgBang:
		switch c {
		case '[':
			im.state, im.alt = imgAlt, 0
		case '!':
			im.start = at
		default:
			im.state = imgNone
		}
	case imgAlt:
		im.alt++
		switch {
		case c == ']':
			im.state = imgClose
		case c == '\n' || im.alt > maxImageAlt:
			im.state = imgNone
		}
	case imgClose:
		if c == '(' {
			im.state, im.urlStart, im.buf = imgURL, at+1, im.buf[:0]
			return
		}
		im.state = imgNone
		if c == '!' {
			im.state, im.start = imgBang, at
		}
	case imgURL:
		if c == ')' || c == ' ' || c == '\n' || c == '\t' || c == '\r' {
			v.endImage()
			return
		}
		im.buf = append(im.buf, c)
		if len(im.buf) >= maxImageURL {
			v.endImage()
		}
	}
}

// endImage judges the URL of the image that just ended.
func (v *Validator) endImage() {
	im := &v.img
	im.state = imgNone
	if !v.cfg.Egress.Enabled {
		return
	}
	u := string(im.buf)
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
	f := validator.Finding{Check: Name, Reason: validator.ReasonDataExfiltration, Start: im.urlStart, End: im.urlStart + len(u),
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
