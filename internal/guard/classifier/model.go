// Package classifier is the guard's embedded text classifier: hashed word
// and character n-grams, word pairs one word apart and the first word
// of each sentence (an imperative opening a sentence reads differently
// from the same verb inside one) over normalised text (see textnorm) with one
// logistic-regression head per reason (prompt_injection, unsafe_content),
// int8-quantised weights, a Platt calibration and thresholds chosen on a
// held-out part of the training data. Scoring a 512-token input takes a
// few hundred microseconds on one core and allocates nothing in steady
// state.
//
// The weights the aegis binary embeds are produced by `aegis train`
// (Train in this package) from the datasets in ../shared; the same data
// and seed give the same bytes.
package classifier

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"sync"

	"github.com/aegis-sentinel/aegis/internal/guard/textnorm"
)

// The head names, equal to the reason codes they argue for.
const (
	HeadInjection = "prompt_injection"
	HeadUnsafe    = "unsafe_content"
	// HeadAny names no head: an item counts as flagged when any head
	// flags it (an evaluation over both).
	HeadAny = "any"
)

// Head is one binary classifier over the shared hashed feature space.
type Head struct {
	Name string
	// Bias and Scale turn the int8 weight sums into a raw logit:
	// raw = Bias + Scale*(Σ_word q/√n_word + Σ_char q/√n_char).
	Bias, Scale float32
	// PlattA and PlattB calibrate raw scores to probabilities:
	// p = 1/(1+exp(-(A*raw+B))), fitted on held-out training data.
	PlattA, PlattB float32
	// Threshold is the raw score at and above which the head flags
	// (risk medium); High is the raw score for risk high. Both were
	// chosen on held-out training data (see Meta.TargetFPR).
	Threshold, High float32
	W               []int8
	prior           int // copy of Model.Prior for the scorer
}

// Meta records how a model was trained; it travels inside the model file.
type Meta struct {
	Seed       uint64            `json:"seed"`
	Epochs     int               `json:"epochs"`
	DataDigest string            `json:"data_digest"`
	TargetFPR  float64           `json:"target_fpr"`
	HighFPR    float64           `json:"high_fpr"`
	Counts     map[string][2]int `json:"counts"` // head -> [negatives, positives] in training
	Holdout    map[string][2]int `json:"holdout"`
	Sources    []string          `json:"sources"`
	// SentenceStarts says the model was trained with sentence-start
	// features (see features.extract); it is scored with them.
	SentenceStarts bool `json:"sentence_starts,omitempty"`
	// SkipGrams says the model was trained with one-gap word pairs.
	SkipGrams bool `json:"skip_grams,omitempty"`
}

func (m *Meta) featOpts() featOpts {
	return featOpts{starts: m.SentenceStarts, skips: m.SkipGrams}
}

// Model is a trained classifier. It is safe for concurrent use.
type Model struct {
	Bits uint8
	// Window and Stride (in words) give the sliding windows that long
	// inputs are also scored on, so that an injection inside a long
	// benign document is not diluted away; the score is the maximum.
	Window, Stride int
	// Prior is the pseudo-count added to each feature group's size in
	// the normalisation (see norm).
	Prior int
	Heads []Head
	Meta  Meta
}

const magic = "AEGISCLF"

// version changes whenever the features change (3: character 4- to
// 6-grams instead of 3- to 5-grams), so that a model file is never scored
// with features it was not trained on.
const version = 3

// MarshalBinary encodes the model in its compact file format:
// a header, a JSON metadata block, then per head its parameters and
// 2^Bits int8 weights.
func (m *Model) MarshalBinary() ([]byte, error) {
	var b bytes.Buffer
	meta, err := json.Marshal(m.Meta)
	if err != nil {
		return nil, fmt.Errorf("classifier: encode meta: %w", err)
	}
	b.WriteString(magic)
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	w(uint32(version))
	w(m.Bits)
	w(uint16(m.Window))
	w(uint16(m.Stride))
	w(uint16(m.Prior))
	w(uint8(len(m.Heads)))
	w(uint32(len(meta)))
	b.Write(meta)
	for _, h := range m.Heads {
		if len(h.W) != 1<<m.Bits {
			return nil, fmt.Errorf("classifier: head %s has %d weights, want %d", h.Name, len(h.W), 1<<m.Bits)
		}
		w(uint8(len(h.Name)))
		b.WriteString(h.Name)
		w([6]float32{h.Bias, h.Scale, h.PlattA, h.PlattB, h.Threshold, h.High})
		w(h.W)
	}
	return b.Bytes(), nil
}

// maxBits bounds the table size a model file may ask for (64 MiB per head).
const maxBits = 26

// UnmarshalBinary decodes a model written by MarshalBinary.
func (m *Model) UnmarshalBinary(data []byte) error {
	r := bytes.NewReader(data)
	hdr := make([]byte, len(magic))
	if _, err := io.ReadFull(r, hdr); err != nil || string(hdr) != magic {
		return errors.New("classifier: not a model file (bad magic)")
	}
	var ver uint32
	var bits, nh uint8
	var win, stride, prior uint16
	var metaLen uint32
	for _, v := range []any{&ver, &bits, &win, &stride, &prior, &nh, &metaLen} {
		if err := binary.Read(r, binary.LittleEndian, v); err != nil {
			return fmt.Errorf("classifier: header: %w", err)
		}
	}
	if ver != version {
		return fmt.Errorf("classifier: model version %d, want %d", ver, version)
	}
	if bits == 0 || bits > maxBits || int64(metaLen) > int64(r.Len()) {
		return fmt.Errorf("classifier: bad header (bits %d, meta %d bytes)", bits, metaLen)
	}
	meta := make([]byte, metaLen)
	if _, err := io.ReadFull(r, meta); err != nil {
		return fmt.Errorf("classifier: meta: %w", err)
	}
	out := Model{Bits: bits, Window: int(win), Stride: int(stride), Prior: int(prior)}
	if err := json.Unmarshal(meta, &out.Meta); err != nil {
		return fmt.Errorf("classifier: meta: %w", err)
	}
	for i := 0; i < int(nh); i++ {
		var n uint8
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			return fmt.Errorf("classifier: head %d: %w", i, err)
		}
		name := make([]byte, n)
		if _, err := io.ReadFull(r, name); err != nil {
			return fmt.Errorf("classifier: head %d name: %w", i, err)
		}
		var p [6]float32
		if err := binary.Read(r, binary.LittleEndian, &p); err != nil {
			return fmt.Errorf("classifier: head %s: %w", name, err)
		}
		if r.Len() < 1<<bits {
			return fmt.Errorf("classifier: head %s: truncated weights", name)
		}
		h := Head{Name: string(name), Bias: p[0], Scale: p[1], PlattA: p[2], PlattB: p[3], Threshold: p[4], High: p[5], W: make([]int8, 1<<bits), prior: int(prior)}
		if err := binary.Read(r, binary.LittleEndian, h.W); err != nil {
			return fmt.Errorf("classifier: head %s weights: %w", name, err)
		}
		out.Heads = append(out.Heads, h)
	}
	if r.Len() != 0 {
		return fmt.Errorf("classifier: %d trailing bytes", r.Len())
	}
	*m = out
	return nil
}

//go:embed model/guard.bin
var embedded []byte

var (
	defaultOnce  sync.Once
	defaultModel *Model
	defaultErr   error
)

// Default returns the model embedded in the binary (written by `aegis
// train`). It is decoded once.
func Default() (*Model, error) {
	defaultOnce.Do(func() {
		m := new(Model)
		if err := m.UnmarshalBinary(embedded); err != nil {
			defaultErr = fmt.Errorf("embedded guard model: %w", err)
			return
		}
		defaultModel = m
	})
	return defaultModel, defaultErr
}

// Head returns the head with the given name.
func (m *Model) Head(name string) (*Head, bool) {
	for i := range m.Heads {
		if m.Heads[i].Name == name {
			return &m.Heads[i], true
		}
	}
	return nil, false
}

// Score is one head's judgement of a text.
type Score struct {
	Head string
	// Raw is the logit (maximum over the whole text, its windows and
	// any decoded base64 payloads).
	Raw float32
	// Prob is the calibrated probability that the text is positive.
	Prob float32
	// Flag is Raw >= Threshold; HighRisk is Raw >= High.
	Flag, HighRisk bool
}

// Prob maps a raw score to a calibrated probability.
func (h *Head) Prob(raw float32) float32 {
	return float32(1 / (1 + math.Exp(-float64(h.PlattA*raw+h.PlattB))))
}

// maxDepth bounds recursion into base64 payloads inside payloads.
const maxDepth = 2

// Scores scores text with every head.
func (m *Model) Scores(text string) []Score {
	out := make([]Score, len(m.Heads))
	for i := range m.Heads {
		out[i] = Score{Head: m.Heads[i].Name, Raw: float32(math.Inf(-1))}
	}
	m.scoreInto(text, out, 0)
	for i := range out {
		h := &m.Heads[i]
		out[i].Prob = h.Prob(out[i].Raw)
		out[i].Flag = out[i].Raw >= h.Threshold
		out[i].HighRisk = out[i].Raw >= h.High
	}
	return out
}

func (m *Model) scoreInto(text string, out []Score, depth int) {
	f := textFeatures(text, m.Bits, m.Meta.featOpts())
	defer featPool.Put(f)
	sums := sumPool.Get().(*[]float32)
	defer sumPool.Put(sums)
	for i := range m.Heads {
		if s := m.Heads[i].rawMax(f, m.Window, m.Stride, sums); s > out[i].Raw {
			out[i].Raw = s
		}
	}
	if depth >= maxDepth {
		return
	}
	for _, p := range textnorm.Payloads(text) {
		m.scoreInto(p, out, depth+1)
	}
}

var sumPool = sync.Pool{New: func() any { s := make([]float32, 0, 1024); return &s }}

// rawWhole scores the whole feature set (used in training too).
func (h *Head) rawWhole(f *features) float32 {
	var sw, sc int32
	for _, ix := range f.idx[:f.nWord] {
		sw += int32(h.W[ix])
	}
	for _, ix := range f.idx[f.nWord:] {
		sc += int32(h.W[ix])
	}
	return h.Bias + h.Scale*(norm(float32(sw), f.nWord, h.prior)+norm(float32(sc), len(f.idx)-f.nWord, h.prior))
}

// norm divides a weight sum by √(n+prior): the pseudo-count prior
// shrinks the few features of a very short text toward the bias, so that
// one or two words cannot decide a verdict on their own.
func norm(sum float32, n, prior int) float32 {
	if n == 0 {
		return 0
	}
	return sum / float32(math.Sqrt(float64(n+prior)))
}

// rawMax is the maximum raw score over the whole text and its windows.
func (h *Head) rawMax(f *features, window, stride int, buf *[]float32) float32 {
	best := h.rawWhole(f)
	if window <= 0 || f.nWords <= window {
		return best
	}
	return max(best, h.windows(f, window, stride, buf, nil))
}

// windows is the maximum raw score over the windows of a text longer
// than window words; each, when not nil, is called with every window's.
func (h *Head) windows(f *features, window, stride int, buf *[]float32, each func(float32)) float32 {
	best := float32(math.Inf(-1))
	// Prefix sums per word of word-feature and char-feature weights and counts.
	nw := f.nWords + 1
	need := 4 * nw
	if cap(*buf) < need {
		*buf = make([]float32, need)
	}
	s := (*buf)[:need]
	clear(s)
	ws, wc, cs, cc := s[:nw], s[nw:2*nw], s[2*nw:3*nw], s[3*nw:]
	for k, ix := range f.idx {
		p := f.pos[k] + 1
		if k < f.nWord {
			ws[p] += float32(h.W[ix])
			wc[p]++
		} else {
			cs[p] += float32(h.W[ix])
			cc[p]++
		}
	}
	for i := 1; i < nw; i++ {
		ws[i] += ws[i-1]
		wc[i] += wc[i-1]
		cs[i] += cs[i-1]
		cc[i] += cc[i-1]
	}
	for a := 0; a < f.nWords; a += stride {
		b := min(a+window, f.nWords)
		v := h.Bias + h.Scale*(norm(ws[b]-ws[a], int(wc[b]-wc[a]), h.prior)+norm(cs[b]-cs[a], int(cc[b]-cc[a]), h.prior))
		if each != nil {
			each(v)
		}
		if v > best {
			best = v
		}
		if b == f.nWords {
			break
		}
	}
	return best
}

// sortedNames returns map keys in order (for deterministic metadata).
func sortedNames[M ~map[string]V, V any](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WindowMax scores text with one head in fixed windows only: the maximum
// raw score over windows of m.Window words (stride m.Stride), the whole
// text counting as one window when it is shorter, and over the decoded
// base64 payloads scored the same way; n is the number of windows
// scored. Unlike Scores, no score is taken over the whole of a long
// text, whose weight sum grows with its length: a window's score does not
// depend on how much text surrounds it. It returns -Inf and 0 when the
// model has no such head or the text has no words.
func (m *Model) WindowMax(text, head string) (best float32, n int) {
	best = float32(math.Inf(-1))
	m.WindowScores(text, head, func(v float32) {
		best = max(best, v)
		n++
	})
	return best, n
}

// WindowScores calls each with the raw score of every window WindowMax
// takes the maximum of.
func (m *Model) WindowScores(text, head string, each func(raw float32)) {
	for i := range m.Heads {
		if m.Heads[i].Name == head {
			m.windowScores(text, &m.Heads[i], 0, each)
			return
		}
	}
}
