package classifier

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/guard/textnorm"
)

// Label is an example's label for one head.
type Label int8

// Labels: Ignore leaves the example out of that head's training.
const (
	Ignore   Label = -1
	Negative Label = 0
	Positive Label = 1
)

// Example is one training text with a label per head (in HeadNames order).
type Example struct {
	Text   string
	Source string
	Labels [2]Label
	// Whole keeps a long example from also being learnt window by
	// window: for a document with one injected sentence, the windows
	// without it are not positives.
	Whole bool
	// Generated marks an example made by the project's code rather than
	// read from a dataset: it is always trained on and never held out,
	// so that thresholds and calibration rest on real held-out text (easy
	// generated negatives would otherwise pull the 1% threshold down).
	Generated bool
}

// HeadNames are the heads Train builds, in Example.Labels order.
var HeadNames = [2]string{HeadInjection, HeadUnsafe}

// TrainConfig holds the training hyperparameters. The zero value is not
// useful; start from DefaultTrainConfig.
type TrainConfig struct {
	Bits           uint8
	Epochs         int
	Seed           uint64
	LearningRate   float64 // AdaGrad base rate
	L2             float64
	HoldoutPercent int     // share of examples held out for calibration (by text hash)
	TargetFPR      float64 // held-out false-positive rate that sets Threshold
	HighFPR        float64 // held-out false-positive rate that sets High
	Window, Stride int
	// Prior is the normalisation pseudo-count (see Model.Prior).
	Prior int
	// TrainWindows are the window sizes (in words) long texts are also
	// learnt in by the injection head.
	TrainWindows []int
	// SourceFPR, when positive, raises each head's threshold until every
	// training source with at least MinSourceNeg held-out negatives has
	// at most this false-positive rate: the pooled TargetFPR alone lets
	// one kind of benign text (say, documents) be flagged far more often
	// while many easy negatives of another kind keep the average low.
	SourceFPR    float64
	MinSourceNeg int
	// SourceBalance, when above 1, weighs each source (up to its first
	// ">") equally within its class, with no source's per-example weight
	// more than SourceBalance times the class's plain weight nor less
	// than its inverse, so that the many long jailbreak templates do not
	// drown out the few short injections. It applies to the injection
	// head only: the unsafe head's held-out recall fell with it (0.61 to
	// 0.40 at 20).
	SourceBalance float64
	// SentenceStarts adds the first word of each sentence or line as a
	// feature of its own (see Meta.SentenceStarts).
	SentenceStarts bool
	// SkipGrams adds word pairs with one word between them (see
	// Meta.SkipGrams).
	SkipGrams bool
	// PosWeight multiplies the positives' class weight (1: balanced).
	PosWeight float64
}

// DefaultTrainConfig is what `aegis train` uses.
func DefaultTrainConfig() TrainConfig {
	// Prior 4 and sentence starts were chosen by leaving training sources
	// out (mean recall at 1% FPR over the bipia, sysprompt, jbb, dan and
	// promptshield folds: prior 16 without starts 0.617, with starts
	// 0.626, prior 8 0.644, prior 4 0.647); leaving languages out gave
	// the same AUC and false-positive rate for priors 4 and 16.
	// Skip-grams likewise (mean over seeds 1 and 2: recall at 1% FPR
	// 0.652 without, 0.657 with; injected into documents 0.390, 0.397;
	// leaving languages out: AUC 0.741 and recall 0.206 either way).
	// Also measured and left out: positives weighed 0.7 or 1.5 times
	// (0.653, 0.651) and 2^20 buckets (0.653; 0.653 with skip-grams).
	return TrainConfig{Bits: 19, Epochs: 16, Seed: 1, LearningRate: 0.1, L2: 1e-7,
		HoldoutPercent: 20, TargetFPR: 0.01, HighFPR: 0.002, Window: 64, Stride: 32, TrainWindows: []int{64}, Prior: 4,
		SourceFPR: 0.02, MinSourceNeg: 25, SourceBalance: 20, SentenceStarts: true, SkipGrams: true}
}

// Report says what Train did.
type Report struct {
	Examples, Duplicates, Conflicts int
	Heads                           []HeadReport
}

// HeadReport describes one trained head on its held-out split.
type HeadReport struct {
	Name                 string
	TrainNeg, TrainPos   int
	HoldNeg, HoldPos     int
	HoldRecall, HoldFPR  float64 // at Threshold
	Threshold, High, Max float32
	// BySource is the held-out flag rate per training source and label
	// ("source +" / "source -").
	BySource map[string]float64
}

type prepared struct {
	ex    Example
	norm  string
	key   uint64
	hold  bool
	idx   []uint32
	nWord int
	// window marks a window of a long text; only the injection head
	// learns from windows (held-out recall rose for it and fell for the
	// unsafe head, whose long texts are model responses).
	window bool
}

// Train fits a model on examples. The result depends only on the
// examples (as a set: input order does not matter) and cfg.
func Train(examples []Example, cfg TrainConfig) (*Model, *Report, error) {
	if cfg.Bits == 0 || cfg.Bits > maxBits || cfg.Epochs <= 0 {
		return nil, nil, fmt.Errorf("classifier: bad training config (bits %d, epochs %d)", cfg.Bits, cfg.Epochs)
	}
	rep := &Report{}
	// Deduplicate on the normalised text; conflicting labels are dropped
	// for that head.
	byNorm := map[string]*prepared{}
	for _, ex := range examples {
		n := textnorm.Normalize(ex.Text)
		if strings.TrimSpace(n) == "" {
			continue
		}
		if p, ok := byNorm[n]; ok {
			rep.Duplicates++
			for h := range p.ex.Labels {
				a, b := p.ex.Labels[h], ex.Labels[h]
				switch {
				case a == Ignore:
					p.ex.Labels[h] = b
				case b == Ignore || a == b:
					p.ex.Whole = p.ex.Whole && ex.Whole
					p.ex.Generated = p.ex.Generated && ex.Generated
					// Keep the smallest source name, so that the
					// result does not depend on input order.
					p.ex.Source = min(p.ex.Source, ex.Source)
				default:
					rep.Conflicts++
					p.ex.Labels[h] = Ignore
				}
			}
			continue
		}
		k := normKey(n)
		byNorm[n] = &prepared{ex: ex, norm: n, key: k, hold: int(k%100) < cfg.HoldoutPercent}
	}
	all := make([]*prepared, 0, len(byNorm))
	for _, p := range byNorm {
		all = append(all, p)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].key != all[j].key {
			return all[i].key < all[j].key
		}
		return all[i].norm < all[j].norm
	})
	rep.Examples = len(all)
	digest := sha256.New()
	for _, p := range all {
		fmt.Fprintf(digest, "%d,%d,%d:%s\x00", p.ex.Labels[0], p.ex.Labels[1], len(p.norm), p.norm)
	}
	var train, hold []*prepared
	f := new(features)
	for _, p := range all {
		if p.hold && !p.ex.Generated {
			hold = append(hold, p)
			continue
		}
		f.extract(p.norm, cfg.Bits, featOpts{starts: cfg.SentenceStarts, skips: cfg.SkipGrams})
		p.idx = slices.Clone(f.idx)
		p.nWord = f.nWord
		train = append(train, p)
		// Long texts are also learnt window by window, the way the scorer
		// reads them, so that the model does not learn "long means
		// attack" from long jailbreak templates against short benign
		// requests.
		for _, tw := range cfg.TrainWindows {
			if p.ex.Whole || tw <= 0 || f.nWords <= tw {
				continue
			}
			for a := 0; a < f.nWords; a += tw {
				w := &prepared{ex: p.ex, key: p.key, window: true}
				b := min(a+tw, f.nWords)
				for k, ix := range f.idx {
					if k == f.nWord {
						w.nWord = len(w.idx)
					}
					if pos := int(f.pos[k]); pos >= a && pos < b {
						w.idx = append(w.idx, ix)
					}
				}
				if f.nWord == len(f.idx) {
					w.nWord = len(w.idx)
				}
				train = append(train, w)
			}
		}
	}
	if len(train) == 0 || len(hold) == 0 {
		return nil, nil, errors.New("classifier: need examples in both the training and the held-out split")
	}
	m := &Model{Bits: cfg.Bits, Window: cfg.Window, Stride: cfg.Stride, Prior: cfg.Prior, Meta: Meta{
		Seed: cfg.Seed, Epochs: cfg.Epochs, DataDigest: hex.EncodeToString(digest.Sum(nil)),
		TargetFPR: cfg.TargetFPR, HighFPR: cfg.HighFPR,
		Counts: map[string][2]int{}, Holdout: map[string][2]int{}, SentenceStarts: cfg.SentenceStarts, SkipGrams: cfg.SkipGrams,
	}}
	srcs := map[string]bool{}
	for _, p := range all {
		srcs[p.ex.Source] = true
	}
	m.Meta.Sources = sortedNames(srcs)
	for hi, name := range HeadNames {
		head, hr, err := trainHead(name, hi, train, hold, cfg, m)
		if err != nil {
			return nil, nil, err
		}
		m.Heads = append(m.Heads, head)
		m.Meta.Counts[name] = [2]int{hr.TrainNeg, hr.TrainPos}
		m.Meta.Holdout[name] = [2]int{hr.HoldNeg, hr.HoldPos}
		rep.Heads = append(rep.Heads, hr)
	}
	// Thresholds were set per head against a model holding only the heads
	// trained so far; scores do not depend on other heads, so they stand.
	return m, rep, nil
}

// normKey is the hash of a normalised text that orders examples and
// decides the held-out split.
func normKey(n string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(n))
	return mix(h.Sum64())
}

// HeldOut reports whether Train, with HoldoutPercent percent, puts text
// in the held-out split (unless the example is Generated). Generators of
// training data use it to keep a held-out text's parts out of what they
// compose for training.
func HeldOut(text string, percent int) bool {
	return int(normKey(textnorm.Normalize(text))%100) < percent
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func trainHead(name string, hi int, train, hold []*prepared, cfg TrainConfig, m *Model) (Head, HeadReport, error) {
	hr := HeadReport{Name: name}
	var set []*prepared
	for _, p := range train {
		if p.window && name != HeadInjection {
			continue
		}
		switch p.ex.Labels[hi] {
		case Positive:
			hr.TrainPos++
			set = append(set, p)
		case Negative:
			hr.TrainNeg++
			set = append(set, p)
		}
	}
	if hr.TrainPos == 0 || hr.TrainNeg == 0 {
		return Head{}, hr, fmt.Errorf("classifier: head %s needs positive and negative examples (have %d/%d)", name, hr.TrainPos, hr.TrainNeg)
	}
	n := float64(len(set))
	wPos, wNeg := n/(2*float64(hr.TrainPos)), n/(2*float64(hr.TrainNeg))
	if cfg.PosWeight > 0 && name == HeadInjection {
		wPos *= cfg.PosWeight
	}
	balance := cfg.SourceBalance
	if name != HeadInjection {
		balance = 0
	}
	weight := sourceWeights(set, hi, balance)
	dim := 1 << cfg.Bits
	w := make([]float64, dim)
	g2 := make([]float64, dim)
	var bias, bg2 float64
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(hi)+1))
	order := make([]int, len(set))
	for i := range order {
		order[i] = i
	}
	const eps = 1e-8
	for ep := 0; ep < cfg.Epochs; ep++ {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, oi := range order {
			p := set[oi]
			nw, nc := p.nWord, len(p.idx)-p.nWord
			iw, ic := invSqrt(nw, cfg.Prior), invSqrt(nc, cfg.Prior)
			z := bias
			for k, ix := range p.idx {
				if k < nw {
					z += w[ix] * iw
				} else {
					z += w[ix] * ic
				}
			}
			y, cw := 0.0, wNeg
			if p.ex.Labels[hi] == Positive {
				y, cw = 1, wPos
			}
			cw *= weight[oi]
			g := (sigmoid(z) - y) * cw
			bg2 += g * g
			bias -= cfg.LearningRate * g / (math.Sqrt(bg2) + eps)
			for k, ix := range p.idx {
				x := ic
				if k < nw {
					x = iw
				}
				gi := g*x + cfg.L2*w[ix]
				g2[ix] += gi * gi
				w[ix] -= cfg.LearningRate * gi / (math.Sqrt(g2[ix]) + eps)
			}
		}
	}
	// Quantise to int8 with one scale per head.
	var maxAbs float64
	for _, v := range w {
		maxAbs = math.Max(maxAbs, math.Abs(v))
	}
	if maxAbs == 0 {
		maxAbs = 1
	}
	scale := maxAbs / 127
	head := Head{Name: name, Bias: float32(bias), Scale: float32(scale), W: make([]int8, dim), PlattA: 1, prior: cfg.Prior}
	for i, v := range w {
		head.W[i] = int8(math.Round(v / scale))
	}
	// Calibrate on the held-out split with the full scorer (windows and
	// payloads included), exactly as inference will score.
	probe := &Model{Bits: m.Bits, Window: m.Window, Stride: m.Stride, Prior: m.Prior, Heads: []Head{head}, Meta: Meta{SentenceStarts: m.Meta.SentenceStarts, SkipGrams: m.Meta.SkipGrams}}
	var negs, pos []float64
	type srcScore struct {
		key string
		s   float64
	}
	var bySrc []srcScore
	for _, p := range hold {
		lab := p.ex.Labels[hi]
		if lab == Ignore {
			continue
		}
		s := float64(probe.Scores(p.ex.Text)[0].Raw)
		sign := " -"
		if lab == Positive {
			sign = " +"
		}
		bySrc = append(bySrc, srcScore{p.ex.Source + sign, s})
		if lab == Positive {
			pos = append(pos, s)
		} else {
			negs = append(negs, s)
		}
	}
	hr.HoldNeg, hr.HoldPos = len(negs), len(pos)
	if len(negs) == 0 || len(pos) == 0 {
		return Head{}, hr, fmt.Errorf("classifier: head %s: held-out split lacks a class (%d neg, %d pos)", name, len(negs), len(pos))
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(negs)))
	head.Threshold = float32(thresholdAt(negs, cfg.TargetFPR))
	if cfg.SourceFPR > 0 {
		bySource := map[string][]float64{}
		for _, x := range bySrc {
			if strings.HasSuffix(x.key, " -") {
				bySource[x.key] = append(bySource[x.key], x.s)
			}
		}
		head.Threshold = boundBySource(head.Threshold, bySource, cfg.SourceFPR, cfg.MinSourceNeg)
	}
	head.High = float32(math.Max(float64(head.Threshold), thresholdAt(negs, cfg.HighFPR)))
	head.PlattA, head.PlattB = platt(pos, negs)
	tp, fp := 0, 0
	for _, s := range pos {
		if float32(s) >= head.Threshold {
			tp++
		}
	}
	for _, s := range negs {
		if float32(s) >= head.Threshold {
			fp++
		}
	}
	hr.BySource = map[string]float64{}
	cnt := map[string]int{}
	for _, x := range bySrc {
		cnt[x.key]++
		if float32(x.s) >= head.Threshold {
			hr.BySource[x.key]++
		}
	}
	for k, n := range cnt {
		hr.BySource[k] /= float64(n)
	}
	hr.HoldRecall = float64(tp) / float64(len(pos))
	hr.HoldFPR = float64(fp) / float64(len(negs))
	hr.Threshold, hr.High, hr.Max = head.Threshold, head.High, float32(negs[0])
	return head, hr, nil
}

// sourceWeights returns a per-example multiplier (1 when balance <= 1)
// that gives every source group the same total weight within its class,
// clipped to [1/balance, balance].
func sourceWeights(set []*prepared, hi int, balance float64) []float64 {
	out := make([]float64, len(set))
	group := func(p *prepared) string {
		src := p.ex.Source
		if i := strings.IndexByte(src, '>'); i >= 0 {
			src = src[:i]
		}
		return fmt.Sprint(p.ex.Labels[hi]) + " " + src
	}
	cnt := map[string]int{}
	classN := map[Label]int{}
	classGroups := map[Label]int{}
	for _, p := range set {
		g := group(p)
		if cnt[g] == 0 {
			classGroups[p.ex.Labels[hi]]++
		}
		cnt[g]++
		classN[p.ex.Labels[hi]]++
	}
	for i, p := range set {
		if balance <= 1 {
			out[i] = 1
			continue
		}
		l := p.ex.Labels[hi]
		w := float64(classN[l]) / (float64(classGroups[l]) * float64(cnt[group(p)]))
		out[i] = min(max(w, 1/balance), balance)
	}
	return out
}

// boundBySource raises thr until every source with at least minN negative
// scores has at most fpr of them at or above it.
func boundBySource(thr float32, negsBySource map[string][]float64, fpr float64, minN int) float32 {
	for _, k := range sortedNames(negsBySource) {
		ns := slices.Clone(negsBySource[k])
		if len(ns) < minN {
			continue
		}
		sort.Sort(sort.Reverse(sort.Float64Slice(ns)))
		thr = max(thr, float32(thresholdAt(ns, fpr)))
	}
	return thr
}

// thresholdAt returns the smallest score above which at most fpr of the
// negatives (sorted in decreasing order) lie.
func thresholdAt(negs []float64, fpr float64) float64 {
	k := int(math.Floor(fpr * float64(len(negs))))
	if k >= len(negs) {
		return negs[len(negs)-1]
	}
	// Flag strictly above the (k+1)-th highest negative.
	return float64(math.Nextafter32(float32(negs[k]), float32(math.Inf(1))))
}

// platt fits p = sigmoid(a*s+b) to held-out scores by Newton's method
// (Platt 1999, with the usual target smoothing), deterministically.
func platt(pos, negs []float64) (float32, float32) {
	np, nn := float64(len(pos)), float64(len(negs))
	tPos, tNeg := (np+1)/(np+2), 1/(nn+2)
	a, b := 1.0, 0.0
	for it := 0; it < 100; it++ {
		var ga, gb, haa, hab, hbb float64
		acc := func(s, t float64) {
			p := sigmoid(a*s + b)
			d := p - t
			ga += d * s
			gb += d
			v := math.Max(p*(1-p), 1e-12)
			haa += v * s * s
			hab += v * s
			hbb += v
		}
		for _, s := range pos {
			acc(s, tPos)
		}
		for _, s := range negs {
			acc(s, tNeg)
		}
		haa += 1e-9
		hbb += 1e-9
		det := haa*hbb - hab*hab
		if det == 0 {
			break
		}
		da := (hbb*ga - hab*gb) / det
		db := (haa*gb - hab*ga) / det
		a -= da
		b -= db
		if math.Abs(da)+math.Abs(db) < 1e-9 {
			break
		}
	}
	return float32(a), float32(b)
}

func invSqrt(n, prior int) float64 {
	if n == 0 {
		return 0
	}
	return 1 / math.Sqrt(float64(n+prior))
}
