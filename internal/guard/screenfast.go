package guard

import (
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
)

// The request pattern (requestRE) is a large alternation that Go's regexp
// runs at about a megabyte a second, and the override markers
// (overrideSigns) are many patterns. Most of a document cannot match
// them, so they run only where a word they need occurs: each override
// marker in the text around its anchor words, the request pattern on the
// lines that hold a request or owner marker (only such a line can raise
// the risk, see ownedRE).

// requestMarkers: a line without one of these cannot raise a tool
// result's risk through requestRE (ownedRE needs "my" or "user"; the
// openers "please", "can you"..., "todo", "kindly" mark a request).
var requestMarkers = []string{"my", "user", "please", "you", "todo", "kindly"}

// lowerASCII returns s with ASCII letters lowered, byte for byte (so
// offsets stay valid).
func lowerASCII(s string) string {
	var b strings.Builder
	start := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			if b.Cap() == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[start:i])
			b.WriteByte(c + 32)
			start = i + 1
		}
	}
	if start == 0 {
		return s
	}
	b.WriteString(s[start:])
	return b.String()
}

// maxRegions bounds the regions one marker is tried on; past it, the
// rest of the text is one region.
const maxRegions = 256

// anchorsByFirst lists the ASCII anchors of overrideSigns by first byte.
var anchorsByFirst = func() (t [128][]string) {
	seen := map[string]bool{}
	for _, sg := range overrideSigns {
		for _, w := range sg.anchors {
			if w[0] < 0x80 && !seen[w] {
				seen[w] = true
				t[w[0]] = append(t[w[0]], w)
			}
		}
	}
	return t
}()

// anchorHits returns the offsets in low (lower-cased text) of every
// anchor word: ASCII anchors at a word start, others anywhere. One pass
// over the words, so the cost does not grow with the number of anchors.
func anchorHits(low string) map[string][]int {
	hits := map[string][]int{}
	for i := nextWordStart(low, 0); i < len(low); i = nextWordStart(low, i+1) {
		c := low[i]
		if c >= 0x80 {
			continue
		}
		for _, w := range anchorsByFirst[c] {
			if strings.HasPrefix(low[i:], w) {
				hits[w] = append(hits[w], i)
			}
		}
	}
	for _, sg := range overrideSigns {
		for _, w := range sg.anchors {
			if w[0] >= 0x80 && hits[w] == nil {
				for off := 0; ; {
					k := strings.Index(low[off:], w)
					if k < 0 {
						break
					}
					hits[w] = append(hits[w], off+k)
					off += k + len(w)
				}
			}
		}
	}
	return hits
}

// findOverride returns the first override marker found in text ("" if
// none), trying each marker near its anchors; low is text lower-cased by
// lowerASCII.
func findOverride(text, low string) string {
	hits := anchorHits(low)
	for _, sg := range overrideSigns {
		end := -1 // the end of the last region tried
		tried := 0
		for _, w := range sg.anchors {
			for _, k := range hits[w] {
				a, b := max(0, k-sg.before), min(len(text), k+len(w)+sg.after)
				for a > 0 && text[a-1] != ' ' && text[a-1] != '\n' && text[a-1] != '\t' {
					a--
				}
				for b < len(text) && text[b] != ' ' && text[b] != '\n' && text[b] != '\t' {
					b++
				}
				if tried++; tried > maxRegions {
					a, b = 0, len(text)
				}
				if b <= end {
					continue
				}
				if mayHold(low[a:b], sg.needs) {
					if m := sg.re.FindString(text[a:b]); m != "" {
						return m
					}
				}
				end = b
				if a == 0 && b == len(text) {
					break
				}
			}
		}
	}
	return ""
}

// mayHold reports whether the region low (lower-cased) holds one of
// needs, or is not all ASCII (the patterns' case folding matches some
// other letters to ASCII ones), or needs is empty.
func mayHold(low string, needs []string) bool {
	if len(needs) == 0 {
		return true
	}
	for i := 0; i < len(low); i++ {
		if low[i] >= utf8.RuneSelf {
			return true
		}
	}
	for _, w := range needs {
		if strings.Contains(low, w) {
			return true
		}
	}
	return false
}

// requestLines returns the lines of text that hold a request or owner
// marker word and where requestRE can match (see mayRequest); low is
// text lower-cased by lowerASCII.
func requestLines(text, low string) []string {
	var out []string
	for len(low) > 0 {
		n := strings.IndexByte(low, '\n')
		if n < 0 {
			n = len(low)
		}
		if hasMarker(low[:n]) && mayRequest(low[:n]) {
			out = append(out, text[:n])
		}
		if n == len(low) {
			break
		}
		text, low = text[n+1:], low[n+1:]
	}
	return out
}

// markersByFirst lists requestMarkers by first byte.
var markersByFirst = func() (t [128][]string) {
	for _, m := range requestMarkers {
		t[m[0]] = append(t[m[0]], m)
	}
	return t
}()

// hasMarker reports whether one of requestMarkers occurs in low as a
// word prefix (hasWord of each, in one pass over the line).
func hasMarker(low string) bool {
	for p := nextWordStart(low, 0); p < len(low); p = nextWordStart(low, p+1) {
		c := low[p]
		if c >= utf8.RuneSelf {
			continue
		}
		for _, m := range markersByFirst[c] {
			if strings.HasPrefix(low[p:], m) {
				return true
			}
		}
	}
	return false
}

// verbsByFirst lists actionVerbs by first byte.
var verbsByFirst = func() (t [128][]string) {
	for _, v := range actionVerbs {
		if !slices.Contains(t[v[0]], v) {
			t[v[0]] = append(t[v[0]], v)
		}
	}
	return t
}()

// mayRequest reports whether requestRE can match the line low (lower-cased
// by lowerASCII): a cheap test that lets most lines skip the pattern.
// requestRE needs an action verb followed by white space and preceded by
// one of its openers: the line's start, sentence or clause punctuation,
// an opening quote or bracket (each with optional white space), or white
// space after "please", "kindly" or "you". The test looks for exactly
// that, so it never turns away a line the pattern matches. A line with
// non-ASCII bytes always goes to the pattern, whose case folding matches
// letters such as U+017F (long s) and U+212A (Kelvin sign) to ASCII ones.
func mayRequest(low string) bool {
	for i := 0; i < len(low); i++ {
		if low[i] >= utf8.RuneSelf {
			return true
		}
	}
	for p := nextWordStart(low, 0); p < len(low); p = nextWordStart(low, p+1) {
		c := low[p]
		for _, v := range verbsByFirst[c] {
			if e := p + len(v); e < len(low) && isRESpace(low[e]) && strings.HasPrefix(low[p:], v) && requestOpener(low, p) {
				return true
			}
		}
	}
	return false
}

// requestOpener reports whether what precedes offset p of low is one of
// requestRE's openers.
func requestOpener(low string, p int) bool {
	if p == 0 {
		return true
	}
	q := p
	for q > 0 && isRESpace(low[q-1]) {
		q--
	}
	if q == 0 {
		return false
	}
	if strings.IndexByte(".!?\n:;\"'`([{", low[q-1]) >= 0 {
		return true
	}
	return q < p && (strings.HasSuffix(low[:q], "please") || strings.HasSuffix(low[:q], "kindly") || strings.HasSuffix(low[:q], "you"))
}

// isRESpace reports the bytes Go's regexp calls \s.
func isRESpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

func isWordByte(c byte) bool { return wordByte[c] }

// wordByte marks the bytes of a word in lower-cased text: ASCII lower-case
// letters, digits, '_' and every byte of a multi-byte rune.
var wordByte = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
	}
	return t
}()

// nextWordStart returns the first offset at or after i that is 0 or
// follows a byte that is not a word byte (where a marker, anchor or verb
// can start), skipping the rest of a word in one tight loop; len(low)
// when none.
func nextWordStart(low string, i int) int {
	if i == 0 || i >= len(low) {
		return i
	}
	for j := i - 1; j < len(low); j++ {
		if !wordByte[low[j]] {
			return j + 1
		}
	}
	return len(low)
}

// WindowTail describes the upper tail of the window scores of one kind
// of benign document: the score T0 that a share Q0 of the windows reach,
// and the scale Beta of its exponential decay above T0 (the share
// reaching T0+x is about Q0*exp(-x/Beta)).
type WindowTail struct{ T0, Beta float32 }

// tailQ0 and tailQ1 are the window shares the tail is fitted between.
const tailQ0, tailQ1 = 0.01, 0.001

// docCalibration holds the window-score tail of each kind, fitted on the
// training part of the benign document corpus (`aegis eval
// --calibrate-docs` prints it); the held-out part was never used.
var docCalibration = map[DocKind]WindowTail{
	DocProse:  {4.1110115, 1.5858488},
	DocCode:   {5.2551956, 1.8827747},
	DocMarkup: {6.128165, 0.43257564},
	DocJSON:   {5.5863585, 1.075894},
	DocConfig: {5.5863585, 1.075894},
	DocLog:    {5.5863585, 1.075894},
	DocEmail:  {5.5863585, 1.075894},
}

// DocFPR and DocHighFPR are the shares of benign documents of a kind
// that may reach medium and high risk, whatever their length.
const DocFPR, DocHighFPR = 0.01, 0.002

// docThreshold returns the medium and high thresholds for the windows of
// a document of kind with n windows: the score that any of n benign
// windows reaches with probability at most DocFPR (DocHighFPR), by the
// union bound over the kind's fitted tail, T0 + Beta*ln(n*Q0/FPR). The
// threshold grows with the number of windows so that a long document is
// no likelier to be flagged than a short one. Never below the head's own.
func docThreshold(h *classifier.Head, kind DocKind, n int) (thr, high float32) {
	c, ok := docCalibration[kind]
	if !ok {
		return h.Threshold, h.High
	}
	at := func(fpr float64) float32 {
		return c.T0 + c.Beta*float32(math.Log(max(1, float64(n))*tailQ0/fpr))
	}
	thr = max(h.Threshold, at(DocFPR))
	high = max(h.High, at(DocHighFPR), thr)
	return thr, high
}

// CalibrateDocs fits the window-score tail of each kind (see WindowTail)
// on the given benign documents (the training part of the document
// corpus). It is how docCalibration was set.
func (g *Guard) CalibrateDocs(docs []string) map[DocKind]WindowTail {
	by := map[DocKind][]float64{}
	for _, d := range docs {
		k := DetectKind(d)
		g.model.WindowScores(Readable(d, k), classifier.HeadInjection, func(v float32) { by[k] = append(by[k], float64(v)) })
	}
	var all []float64
	for _, s := range by {
		all = append(all, s...)
	}
	fit := func(s []float64) WindowTail {
		slices.Sort(s)
		slices.Reverse(s)
		at := func(q float64) float64 { return s[min(int(q*float64(len(s))), len(s)-1)] }
		t0, t1 := at(tailQ0), at(tailQ1)
		return WindowTail{T0: float32(t0), Beta: float32(max(t1-t0, 0.1) / math.Log(tailQ0/tailQ1))}
	}
	out := map[DocKind]WindowTail{}
	for k, s := range by {
		// Too few windows to place the tail's quantiles: the tail of all
		// kinds together stands in.
		if len(s) < minTailWindows {
			s = all
		}
		out[k] = fit(slices.Clone(s))
	}
	return out
}

// minTailWindows is the fewest windows a kind's own tail is fitted on.
const minTailWindows = 2 / tailQ1
