package leak

import (
	"bytes"

	"github.com/aegis-sentinel/aegis/internal/toolcalls"
)

// A markdown image (![alt](URL)) is fetched by the client that renders
// the answer, so a secret hidden in its URL leaves with the request:
// URL-encoded, in a query parameter, or base64'd there. The detector
// follows the image syntax byte by byte, holds the URL from its first
// byte until it ends (')', white space, a line end or maxImageURL
// bytes), then reads the URL's decodings (the same ones tool-call
// arguments are read through) for marked secrets and credentials. The
// URL as written is read like any other text.

// maxImageURL bounds the URL held back; a longer one is judged at that
// length.
const (
	maxImageURL = 2048
	maxImageAlt = 256
)

// imageState is where the detector is in a markdown image.
type imageState uint8

const (
	imgNone  imageState = iota
	imgBang             // read "!"
	imgAlt              // inside "[...]"
	imgClose            // read "]"
	imgURL              // inside "(...)"
)

// images follows the markdown image syntax through p, whose first byte is
// at offset at. Outside an image only a '!' can begin one.
func (d *Detector) images(p []byte, at int) {
	for i := 0; i < len(p); i++ {
		if d.img == imgNone {
			j := bytes.IndexByte(p[i:], '!')
			if j < 0 {
				return
			}
			i += j
		}
		d.imageByte(p[i], at+i)
	}
}

// imageByte advances the markdown image state by byte c at offset at.
func (d *Detector) imageByte(c byte, at int) {
	switch d.img {
	case imgURL:
		if c == ')' || isSpaceByte(c) {
			d.endImage()
		} else {
			d.imgBuf = append(d.imgBuf, c)
			if len(d.imgBuf) >= maxImageURL {
				d.endImage()
			}
		}
		return
	case imgBang:
		if c == '[' {
			d.img, d.imgAlt = imgAlt, 0
			return
		}
	case imgAlt:
		switch {
		case c == ']':
			d.img = imgClose
		case c == '\n' || d.imgAlt >= maxImageAlt:
			d.img = imgNone
		default:
			d.imgAlt++
		}
		return
	case imgClose:
		if c == '(' {
			d.img, d.imgStart, d.imgBuf = imgURL, at+1, d.imgBuf[:0]
			return
		}
	}
	d.img = imgNone
	if c == '!' {
		d.img = imgBang
	}
}

// imageHeld returns where the image URL being read starts, or -1.
func (d *Detector) imageHeld() int {
	if d.img == imgURL {
		return d.imgStart
	}
	return -1
}

// endImage judges the URL read and leaves the image.
func (d *Detector) endImage() {
	d.img = imgNone
	if len(d.imgBuf) == 0 {
		return
	}
	url := string(d.imgBuf)
	start, end := d.imgStart, d.imgStart+len(d.imgBuf)
	d.imgBuf = d.imgBuf[:0]
	for _, v := range toolcalls.Derived(url) {
		sub := d.decodingReader()
		sub.Write([]byte(v.Text))
		sub.Close()
		for _, f := range sub.findings {
			f.Start, f.End = start, end
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
	if len(d.secrets) > 0 {
		s.lits = newLiteralMatcher(d.secrets)
	}
	return s
}
