package leak

import (
	"github.com/aegis-sentinel/aegis/internal/mdimage"
	"github.com/aegis-sentinel/aegis/internal/secretrules"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
)

// A markdown image (![alt](URL)) is fetched by the client that renders
// the answer, so a secret hidden in its URL leaves with the request:
// URL-encoded, in a query parameter, or base64'd there. The detector
// follows the image syntax (package mdimage), holds the URL from its
// first byte until it ends, then reads the URL's decodings (the same
// ones tool-call arguments are read through) for marked secrets and
// credentials. The URL as written is read like any other text.

// images follows the markdown image syntax through p, whose first byte is
// at offset at, and judges each URL that ends there.
func (d *Detector) images(p []byte, at int) {
	for len(p) > 0 {
		n, img, ok := d.img.Scan(p, at)
		if ok {
			d.judgeImage(img)
		}
		p, at = p[n:], at+n
	}
}

// imageHeld returns where the image URL being read starts, or -1.
func (d *Detector) imageHeld() int {
	_, url := d.img.Pending()
	return url
}

// judgeImage reads the URL's decodings for marked secrets and
// credentials.
func (d *Detector) judgeImage(img mdimage.Image) {
	if len(img.URL) == 0 {
		return
	}
	url := string(img.URL)
	for _, v := range toolcalls.Derived(url) {
		sub := d.decodingReader()
		sub.Write([]byte(v.Text))
		sub.Close()
		for _, f := range sub.findings {
			f.Start, f.End = img.Start, img.End
			f.Message += " (in a markdown image URL, " + v.How + ")"
			d.add(f)
		}
	}
}

// decodingReader is a detector for one decoding of an image URL: the
// same secrets and credential rules, no system-prompt overlap (a URL is
// no copy of the prompt) and no image tracking of its own.
func (d *Detector) decodingReader() *Detector {
	s := &Detector{cfg: d.cfg, allow: d.allow, quoteHold: -1, awsAt: -1, awsRun: -1, beginHold: -1, noImages: true}
	s.cfg.SystemPrompt = false
	if d.rules != nil {
		s.rules = secretrules.Default().NewStream(nil)
	}
	if len(d.secrets) > 0 {
		s.lits = newLiteralMatcher(d.secrets)
	}
	return s
}
