// Package mdimage follows the markdown image syntax (![alt](URL))
// through text that arrives in pieces. A client that renders an answer
// fetches every image URL in it, so a URL is a destination whatever the
// text around it says: the checks that judge destinations (the leak
// check's secrets in a URL, the tool policy's flow rule) read each URL
// this scanner hands them, once it has ended.
//
// The scanner is a byte-at-a-time state machine with no allocation after
// its URL buffer has grown: outside an image only a '!' can begin one, an
// alt text ends at ']' (or gives up at a line end or after MaxAlt bytes),
// and a URL ends at ')', white space or MaxURL bytes.
package mdimage

import "bytes"

const (
	// MaxURL bounds the URL held back; a longer one is judged at this
	// length.
	MaxURL = 2048
	// MaxAlt bounds the alt text read before the scanner gives up on an
	// image.
	MaxAlt = 256
)

// State is where the scanner is in an image.
type State uint8

// The states, None first.
const (
	None  State = iota // outside any image
	Bang               // read "!"
	Alt                // inside "[...]"
	Close              // read "]"
	URL                // inside "(...)"
)

func (s State) String() string {
	switch s {
	case None:
		return "none"
	case Bang:
		return "bang"
	case Alt:
		return "alt"
	case Close:
		return "close"
	case URL:
		return "url"
	}
	return "unknown"
}

// Scanner follows the image syntax. The zero value is ready.
type Scanner struct {
	state    State
	bang     int // offset of the '!' of the image in progress
	urlStart int // offset of the URL's first byte
	alt      int
	buf      []byte
}

// Image is a URL that ended: its bytes (valid until the next call on the
// scanner) and where it starts and ends in the text.
type Image struct {
	URL        []byte
	Start, End int
	// Bang is the offset of the image's '!'.
	Bang int
}

// Scan reads p, whose first byte is at offset at, up to and including
// the byte that ends an image URL. It returns how many bytes it read and
// the image that ended (ok false when none did: then it read all of p).
// Call it again with the rest of p.
func (s *Scanner) Scan(p []byte, at int) (n int, img Image, ok bool) {
	for i := 0; i < len(p); i++ {
		if s.state == None {
			j := bytes.IndexByte(p[i:], '!')
			if j < 0 {
				return len(p), Image{}, false
			}
			i += j
		}
		if s.step(p[i], at+i) {
			return i + 1, s.take(), true
		}
	}
	return len(p), Image{}, false
}

// End reports the image whose URL runs to the end of the text, and
// leaves any image in progress.
func (s *Scanner) End() (Image, bool) {
	ended := s.state == URL
	s.state = None
	if !ended {
		return Image{}, false
	}
	return s.take(), true
}

// take hands over the URL just ended.
func (s *Scanner) take() Image {
	s.state = None
	return Image{URL: s.buf, Start: s.urlStart, End: s.urlStart + len(s.buf), Bang: s.bang}
}

// State returns where the scanner is.
func (s *Scanner) State() State { return s.state }

// Pending returns the offset of the '!' of the image in progress and of
// its URL's first byte (-1 each when there is none, or no URL yet).
func (s *Scanner) Pending() (bang, url int) {
	bang, url = -1, -1
	if s.state != None {
		bang = s.bang
	}
	if s.state == URL {
		url = s.urlStart
	}
	return bang, url
}

// step advances by byte c at offset at; true when c ended a URL.
func (s *Scanner) step(c byte, at int) bool {
	switch s.state {
	case URL:
		if c == ')' || isSpace(c) {
			return true
		}
		s.buf = append(s.buf, c)
		return len(s.buf) >= MaxURL
	case Bang:
		if c == '[' {
			s.state, s.alt = Alt, 0
			return false
		}
	case Alt:
		switch {
		case c == ']':
			s.state = Close
		case c == '\n' || s.alt >= MaxAlt:
			s.state = None
		default:
			s.alt++
		}
		return false
	case Close:
		if c == '(' {
			s.state, s.urlStart, s.buf = URL, at+1, s.buf[:0]
			return false
		}
	}
	s.state = None
	if c == '!' {
		s.state, s.bang = Bang, at
	}
	return false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'
}
