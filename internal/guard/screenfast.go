package guard

import (
	"math"
	"slices"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
)

// The two sign patterns (overrideRE, requestRE) are large alternations
// that Go's regexp runs at about a megabyte a second. Most of a document
// cannot match them, so they run only where a word they need occurs: the
// override pattern in the text around its anchor words, the request
// pattern on the lines that hold a request or owner marker (only such a
// line can raise the risk, see ownedRE). Both finders return what the
// pattern over the whole text would, except for a match stretched over
// more than regionBefore bytes before its anchor word.

// overrideAnchors: every alternative of overrideRE contains one of these
// (in lower case).
var overrideAnchors = []string{"ignor", "disregard", "forget", "overrid", "skip", "instruction", "important", "information",
	"system", "assistant", "model", "agent", "gpt", "claude", "llama", "gemini", "chatbot", "llm", "before", "user",
	"strictly", "stop", "halt", "dear", "hey", "attention", "note", "ai", "message", "忽略"}

// requestMarkers: a line without one of these cannot raise a tool
// result's risk through requestRE (ownedRE needs "my" or "user"; the
// openers "please", "can you"..., "todo", "kindly" mark a request).
var requestMarkers = []string{"my", "user", "please", "you", "todo", "kindly"}

const regionBefore, regionAfter = 200, 300

// lowerASCII returns s with ASCII letters lowered, byte for byte (so
// offsets stay valid).
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

// findOverride returns overrideRE's first match in text ("" if none).
func findOverride(text string) string {
	low := lowerASCII(text)
	type span struct{ a, b int }
	var spans []span
	for _, w := range overrideAnchors {
		for off := 0; ; {
			k := strings.Index(low[off:], w)
			if k < 0 {
				break
			}
			k += off
			off = k + len(w)
			// The pattern's words start at a word boundary ("ai" is a
			// whole word).
			if w[0] < 0x80 && (k > 0 && isWordByte(low[k-1]) || w == "ai" && off < len(low) && isWordByte(low[off])) {
				continue
			}
			a, b := max(0, k-regionBefore), min(len(text), off+regionAfter)
			for a > 0 && text[a-1] != ' ' && text[a-1] != '\n' && text[a-1] != '\t' {
				a--
			}
			for b < len(text) && text[b] != ' ' && text[b] != '\n' && text[b] != '\t' {
				b++
			}
			spans = append(spans, span{a, b})
			if len(spans) > 4096 { // merging covers the text anyway
				off = len(low)
			}
		}
	}
	if len(spans) == 0 {
		return ""
	}
	slices.SortFunc(spans, func(x, y span) int { return x.a - y.a })
	merged := spans[:1]
	for _, s := range spans[1:] {
		last := &merged[len(merged)-1]
		if s.a <= last.b {
			last.b = max(last.b, s.b)
			continue
		}
		merged = append(merged, s)
	}
	for _, s := range merged {
		if m := overrideRE.FindString(text[s.a:s.b]); m != "" {
			return m
		}
	}
	return ""
}

// requestLines returns the lines of text that hold a request or owner
// marker word.
func requestLines(text string) []string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		low := lowerASCII(line)
		for _, m := range requestMarkers {
			if hasWord(low, m) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// hasWord reports whether w occurs in s as a word prefix ("user" in
// "users" and "user's" too).
func hasWord(s, w string) bool {
	for off := 0; ; {
		k := strings.Index(s[off:], w)
		if k < 0 {
			return false
		}
		k += off
		if k == 0 || !isWordByte(s[k-1]) {
			return true
		}
		off = k + len(w)
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}

// docCalibration holds, per document kind, the window score at and above
// which a tool result of that kind is flagged (medium) and the one for
// high risk. They were set on the training part of the benign document
// corpus (`aegis eval --docs --calibrate` prints them): the lowest
// scores that flag at most DocFPR (medium) and DocHighFPR (high)
// of the training documents of each kind. The held-out part was never used.
var docCalibration = map[DocKind][2]float32{
	DocJSON:   {4.5861697, 4.5861697},
	DocCode:   {5.706452, 11.740663},
	DocProse:  {8.143262, 8.143262},
	DocConfig: {7.575411, 7.575411},
	DocMarkup: {7.6686134, 7.6686134},
	DocLog:    {1.1309305, 1.1309305},
	DocEmail:  {14.104312, 14.104312},
}

// docThreshold returns the medium and high thresholds for a window of a
// document of kind: never below the head's own.
func docThreshold(h *classifier.Head, kind DocKind) (thr, high float32) {
	c := docCalibration[kind]
	thr = max(h.Threshold, c[0])
	high = max(h.High, c[1], thr)
	return thr, high
}

// DocFPR and DocHighFPR are the shares of the training documents of a
// kind that the calibrated thresholds may flag (medium and high risk).
const DocFPR, DocHighFPR = 0.01, 0.002

// CalibrateDocs returns, per kind, the window thresholds (medium, high)
// that flag at most DocFPR and DocHighFPR of the given benign documents
// of that kind (the training part of the document corpus). It is how
// docCalibration was set.
func (g *Guard) CalibrateDocs(docs []string) map[DocKind][2]float32 {
	by := map[DocKind][]float64{}
	for _, d := range docs {
		k := DetectKind(d)
		by[k] = append(by[k], float64(g.model.WindowMax(Readable(d, k), classifier.HeadInjection)))
	}
	out := map[DocKind][2]float32{}
	for k, s := range by {
		slices.Sort(s)
		slices.Reverse(s)
		at := func(fpr float64) float32 {
			i := min(int(fpr*float64(len(s))), len(s)-1)
			return nextUp(float32(s[i]))
		}
		out[k] = [2]float32{at(DocFPR), at(DocHighFPR)}
	}
	return out
}

func nextUp(f float32) float32 { return math.Nextafter32(f, float32(math.Inf(1))) }
