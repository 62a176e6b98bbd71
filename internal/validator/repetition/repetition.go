// Package repetition catches degenerate loops in streamed output: a word
// or token repeated over and over ("the the the ..."), a sentence or a
// block of lines repeated, and a whole story that starts again from the
// beginning, while legitimate repetition passes: numbered lists, tables,
// code that sets many similar elements, repeated records with different
// values, a poem's refrain, "very very".
//
// # Method
//
// The output is cut into tokens and each token is hashed: words
// (case-folded runs of letters, digits and '_') and symbols (any other
// non-space rune; a run of one symbol is a token per four runes; a
// newline is a symbol, other white space only separates). A loop is a tail of the token
// stream that equals an earlier span at a fixed distance p, the period:
// token i equals token i-p for every i in the tail. This is tandem-repeat
// detection on token hashes, done incrementally:
//
//   - A rolling hash over the last K tokens (K = 8) is kept in a small
//     table of recent positions. When the K tokens just read occurred
//     before, ending p tokens ago (and the tokens really are equal, not
//     just the hashes), p becomes a candidate period, and the repeat is
//     taken to begin at the first of those K tokens.
//   - Each candidate counts how many tokens have recurred since (run).
//     The first token that differs from the one p tokens before ends the
//     candidate: a list index, a table cell or a record value that
//     changes breaks the repeat, which is why lists, tables and code that
//     sets a[0], a[1], ... pass.
//   - A candidate is a loop once its run reaches need(p): for short
//     periods (up to min_block_tokens/(min_repeats-1) tokens) at least
//     min_repeats copies and at least min_repeat_tokens recurred tokens;
//     for medium periods (up to twice min_block_tokens) one whole period
//     repeated exactly; for longer periods min_block_tokens recurred
//     tokens, or only min_restart_tokens when the repeat copies the
//     output from its very beginning (a story that starts over). A period
//     made of symbols only (no word) needs four times as many, so a
//     markdown rule, a table's "| --- | --- |" row or a run of closing
//     braces does not count as a loop.
//
// With the defaults (min_repeats 3, min_repeat_tokens 24, min_block_tokens
// 64, min_restart_tokens 32) a loop is found after this many recurred
// tokens, counted from where the repetition begins:
//
//	period 1..12 tokens (a word, a short phrase)    24
//	period 13..32 (a sentence)                      2 × period, at most 64
//	period 33..128 (a paragraph, a record)          max(64, period): one whole copy
//	period > 128 (a block)                          64
//	period > 32 copying the output from its start    32 (a restart)
//
// Periods of 65..128 tokens wait for a whole exact copy on purpose: an
// array of records or a table whose rows differ in one value has that
// shape, and only the differing value, one period later, tells it from a
// loop. Records longer than 128 tokens that differ in a single value are
// the known false-positive risk. The cost is O(candidates) per token,
// usually zero or one.
//
// # What it holds back
//
// Settled holds back only text that could still be the beginning of a
// repeat: of the last K-1 tokens (a candidate appears once K tokens
// match), those from the first token whose hash occurred earlier in the
// output (a k-gram starting at a token never seen before cannot repeat
// anything), and, while a candidate is alive, everything from where its
// repeat began. The token being read is held only while what has come of
// it so far is also the beginning of an earlier token (a set of prefix
// hashes answers that): "Th" waits if "The" came before, "Hor" flows at
// once if no earlier token began with "hor". Everything else is
// released, so the opening tokens of an output, all new, flow to the
// client letter by letter as they stream.
//
// # The finding
//
// Start is where the repetition begins: the first token of the first
// copy that repeats earlier text (the earlier copy itself is ordinary
// text that was already released). End is the end of the token at which
// the loop became certain. The message gives the kind of loop (token,
// phrase, block, restart), its period and how much recurred. One loop ends the check: later text is not judged.
package repetition

import (
	"fmt"
	"sync"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Name is the registry name of the check.
const Name = "repetition"

// Config is the policy section of the check. Counts are in tokens (words
// and symbols, see the package doc).
type Config struct {
	// MinPeriodTokens and MaxPeriodTokens bound the length of the
	// repeating unit. Longer periods cost memory (about 24 bytes per
	// token of MaxPeriodTokens), not time.
	MinPeriodTokens int `yaml:"min_period_tokens" json:"min_period_tokens"`
	MaxPeriodTokens int `yaml:"max_period_tokens" json:"max_period_tokens"`
	// MinRepeats is the number of copies a short period needs.
	MinRepeats int `yaml:"min_repeats" json:"min_repeats"`
	// MinRepeatTokens is the fewest recurred tokens for any loop.
	MinRepeatTokens int `yaml:"min_repeat_tokens" json:"min_repeat_tokens"`
	// MinBlockTokens is how many tokens of a long block must recur
	// verbatim before it counts as a loop.
	MinBlockTokens int `yaml:"min_block_tokens" json:"min_block_tokens"`
	// MinRestartTokens is the same for a block that copies the output
	// from its beginning (the model starting over).
	MinRestartTokens int `yaml:"min_restart_tokens" json:"min_restart_tokens"`
}

// DefaultConfig returns the defaults described in the package doc.
func DefaultConfig() *Config {
	return &Config{
		MinPeriodTokens:  1,
		MaxPeriodTokens:  1024,
		MinRepeats:       3,
		MinRepeatTokens:  24,
		MinBlockTokens:   64,
		MinRestartTokens: 32,
	}
}

func (c *Config) validate() error {
	switch {
	case c.MinPeriodTokens < 1:
		return fmt.Errorf("repetition: min_period_tokens %d must be at least 1", c.MinPeriodTokens)
	case c.MaxPeriodTokens < c.MinPeriodTokens || c.MaxPeriodTokens > 1<<16:
		return fmt.Errorf("repetition: max_period_tokens %d out of range %d..65536", c.MaxPeriodTokens, c.MinPeriodTokens)
	case c.MinRepeats < 2:
		return fmt.Errorf("repetition: min_repeats %d must be at least 2", c.MinRepeats)
	case c.MinRepeatTokens < kgram:
		return fmt.Errorf("repetition: min_repeat_tokens %d must be at least %d", c.MinRepeatTokens, kgram)
	case c.MinBlockTokens < kgram:
		return fmt.Errorf("repetition: min_block_tokens %d must be at least %d", c.MinBlockTokens, kgram)
	case c.MinRestartTokens < kgram:
		return fmt.Errorf("repetition: min_restart_tokens %d must be at least %d", c.MinRestartTokens, kgram)
	}
	return nil
}

// Register adds the check to r.
func Register(r *validator.Registry) {
	r.Register(validator.Spec{
		Name:    Name,
		Summary: "catches degenerate loops: repeated words, sentences, line blocks, a story starting over",
		Doc: `Finds a tail of the output that repeats an earlier span exactly, token for
token (tandem-repeat detection on hashed word and symbol tokens). Short
periods need min_repeats copies and min_repeat_tokens recurred tokens;
long blocks need min_block_tokens recurred tokens, or min_restart_tokens
when the output starts over from its beginning. Any token that differs
(a list number, a table cell, an array index, a record value) breaks the
repeat, so lists, tables and similar code lines pass. Holds back only a
repeat that has begun and the last few tokens from one seen before (a word
being read only while it could still equal an earlier token). The finding
starts where the repetition begins.`,
		Reasons: []validator.Reason{validator.ReasonRepetitionLoop},
		Example: "min_repeats: 3\nmin_repeat_tokens: 24\nmin_block_tokens: 64\nmin_restart_tokens: 32\nmax_period_tokens: 1024\n",
		Config:  func() any { return DefaultConfig() },
		New: func(cfg any, _ *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*Config)
			if c == nil {
				c = DefaultConfig()
			}
			return New(*c)
		},
	})
}

const (
	kgram        = 8 // tokens per rolling-hash window
	kgramBase    = 0x9E3779B97F4A7C15
	maxCands     = 8       // candidate periods tracked at once
	restartSlack = 4       // a repeat copying from a token this close to the start is a restart
	symbolFactor = 4       // symbol-only periods need this many times the evidence
	recentMask   = 15      // ring of the starts of the last 16 tokens (>= kgram)
	seenWords    = 1 << 10 // 64 Ki bits of token hashes seen so far
)

type candidate struct {
	p        int  // period in tokens
	run      int  // tokens recurred so far
	start    int  // token index where the repeat began
	startOff int  // its byte offset
	need     int  // run needed to call it a loop
	restart  bool // copies the output from its beginning
}

// Detector is the repetition validator. Create it with New.
type Detector struct {
	cfg Config
	tok tokenizer

	n      int      // tokens read
	hashes []uint64 // ring of token hashes, len a power of two > MaxPeriod+kgram
	kh     []uint64 // ring of the rolling k-gram hash ending at each token
	mask   int
	table  []int32 // k-gram hash -> last token index ending that k-gram, +1 (0 = empty)
	tmask  uint64
	pow    uint64 // kgramBase^(kgram-1)
	roll   uint64

	recentStart [recentMask + 1]int  // byte offsets where the last tokens started
	recentSeen  [recentMask + 1]bool // whether that token's hash occurred earlier
	seen        []uint64             // bitset of token hashes seen so far (false positives only hold more)

	cands    []candidate
	findings []validator.Finding
	closed   bool
	emit     emitFunc
	bufs     *buffers // the tables above, back to the pool at Close
}

// reset zeroes what a detector that read n tokens wrote into the tables,
// before they go back to the pool. While n fits the ring, the tokens' own
// hashes say which entries those were: a short answer clears a few
// hundred words, not the whole 64 KiB.
func (b *buffers) reset(n int) {
	if n > b.size {
		clear(b.hashes)
		clear(b.kh)
		clear(b.seen)
		clear(b.table)
	} else {
		tmask := uint64(len(b.table) - 1)
		for i := range n {
			b.seen[b.hashes[i]%(seenWords*64)/64] = 0
			b.table[b.kh[i]&tmask] = 0
		}
		clear(b.hashes[:n])
		clear(b.kh[:n])
	}
	clear(b.prefixes)
}

// buffers are a detector's tables (about 64 KiB with the default
// max_period_tokens). Every attempt of every request builds a detector,
// so they are pooled: a fresh 64 KiB per attempt was most of the
// gateway's garbage per request.
type buffers struct {
	size             int
	hashes, kh, seen []uint64
	prefixes         []uint64
	table            []int32
}

var bufPool sync.Pool

func getBuffers(size int) *buffers {
	if b, ok := bufPool.Get().(*buffers); ok && b.size == size {
		return b // zeroed by reset
	}
	return &buffers{size: size, hashes: make([]uint64, size), kh: make([]uint64, size), table: make([]int32, 2*size),
		seen: make([]uint64, seenWords), prefixes: make([]uint64, 1<<prefixBits/64)}
}

var _ validator.Validator = (*Detector)(nil)

// New returns a detector, or an error for an invalid configuration.
func New(cfg Config) (*Detector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	size := 1
	for size <= cfg.MaxPeriodTokens+kgram+1 {
		size <<= 1
	}
	d := &Detector{
		cfg:   cfg,
		mask:  size - 1,
		tmask: uint64(2*size - 1),
		cands: make([]candidate, 0, maxCands),
	}
	d.bufs = getBuffers(size)
	d.hashes, d.kh, d.table, d.seen, d.tok.prefixes = d.bufs.hashes, d.bufs.kh, d.bufs.table, d.bufs.seen, d.bufs.prefixes
	d.pow = 1
	for i := 0; i < kgram-1; i++ {
		d.pow *= kgramBase
	}
	d.emit = d.token
	return d, nil
}

// Name returns "repetition".
func (d *Detector) Name() string { return Name }

// Write feeds the next piece of output.
func (d *Detector) Write(p []byte) (int, error) {
	if len(d.findings) == 0 && !d.closed {
		d.tok.write(p, d.emit)
	}
	return len(p), nil
}

// Close flushes the last token. The detector's tables go back to a pool:
// after Close only Settled and Findings are answered, from other fields.
func (d *Detector) Close() {
	if d.closed {
		return
	}
	if len(d.findings) == 0 {
		d.tok.flush(d.emit)
	}
	d.closed = true
	if d.bufs != nil {
		d.bufs.reset(d.n)
		bufPool.Put(d.bufs)
		d.bufs, d.hashes, d.kh, d.table, d.seen, d.tok.prefixes = nil, nil, nil, nil, nil, nil
	}
}

// Findings returns the loop, if one was found.
func (d *Detector) Findings() []validator.Finding { return d.findings }

// Settled returns the offset before which no loop can begin any more.
func (d *Detector) Settled() int {
	if len(d.findings) > 0 {
		return d.findings[0].Start
	}
	if d.closed {
		return d.tok.off
	}
	// The next token read may complete a k-gram that begins kgram-1
	// tokens back. A cut rune is not settled. The token being read is
	// held only while it could still equal an earlier token: once one of
	// its prefixes began no earlier token (novel), no repeat can begin at
	// it, and its letters flow as they come.
	s := d.tok.off - d.tok.ncarry
	if d.tok.kind != tokNone && !d.tok.novel {
		s = d.tok.start
	}
	// A k-gram can repeat earlier text only if its first token occurred
	// earlier, so of the last kgram-1 tokens only those from the first
	// token seen before are held. At the start of an output, where every
	// token is new, nothing waits: the first tokens reach the client at once.
	for j := max(0, d.n-(kgram-1)); j < d.n; j++ {
		if d.recentSeen[j&recentMask] {
			if o := d.recentStart[j&recentMask]; o < s {
				s = o
			}
			break
		}
	}
	for i := range d.cands {
		if o := d.cands[i].startOff; o < s {
			s = o
		}
	}
	return s
}

// need returns the run a candidate of period p needs to be a loop.
func (d *Detector) need(p int, restart, words bool) int {
	c := &d.cfg
	var n int
	switch {
	case p*(c.MinRepeats-1) <= c.MinBlockTokens:
		n = max(c.MinRepeatTokens, p*(c.MinRepeats-1))
	case p <= 2*c.MinBlockTokens:
		n = max(c.MinBlockTokens, p)
	default:
		n = c.MinBlockTokens
	}
	if restart && p*(c.MinRepeats-1) > c.MinBlockTokens {
		n = min(n, c.MinRestartTokens)
	}
	if !words {
		n *= symbolFactor
	}
	return n
}

// token is called by the tokenizer for every complete token.
func (d *Detector) token(h uint64, start, end int) {
	if len(d.findings) > 0 {
		return // one loop ends the check
	}
	i := d.n
	d.n++
	d.hashes[i&d.mask] = h
	d.recentStart[i&recentMask] = start
	bit := h % (seenWords * 64)
	// A token the tokenizer found novel (one of its prefixes began no
	// earlier token) was released while it was read; the bitset may still
	// say seen by a collision, and must not take that back.
	d.recentSeen[i&recentMask] = d.seen[bit/64]&(1<<(bit%64)) != 0 && !d.tok.novel
	d.seen[bit/64] |= 1 << (bit % 64)

	// Advance the surviving candidates; a differing token ends one.
	live := d.cands[:0]
	for _, c := range d.cands {
		if d.hashes[(i-c.p)&d.mask] != h {
			continue
		}
		c.run++
		if c.run >= c.need {
			d.found(c, end)
			return
		}
		live = append(live, c)
	}
	d.cands = live

	// Roll the k-gram hash and look for an earlier occurrence.
	if i >= kgram {
		d.roll -= d.hashes[(i-kgram)&d.mask] * d.pow
	}
	d.roll = d.roll*kgramBase + h
	d.kh[i&d.mask] = d.roll
	if i < kgram-1 {
		return
	}
	slot := &d.table[d.roll&d.tmask]
	prev := int(*slot) - 1
	*slot = int32(i + 1)
	if prev < 0 {
		return
	}
	p := i - prev
	if p < d.cfg.MinPeriodTokens || p > d.cfg.MaxPeriodTokens || d.kh[prev&d.mask] != d.roll {
		return
	}
	for j := 0; j < kgram; j++ {
		if d.hashes[(i-j)&d.mask] != d.hashes[(prev-j)&d.mask] {
			return // hash collision
		}
	}
	for _, c := range d.cands {
		if c.p == p {
			return
		}
	}
	first := i - kgram + 1 // the repeat begins here; it copies first-p
	words := false
	for j := 0; j < p; j++ {
		if d.hashes[(i-j)&d.mask]&1 == 1 {
			words = true
			break
		}
	}
	restart := first-p < restartSlack
	c := candidate{
		p:        p,
		run:      kgram,
		start:    first,
		startOff: d.recentStart[first&recentMask],
		restart:  restart,
		need:     d.need(p, restart, words),
	}
	if c.run >= c.need {
		d.found(c, end)
		return
	}
	if len(d.cands) == maxCands {
		// Drop the youngest (shortest run): it has the least evidence.
		k := 0
		for j := range d.cands {
			if d.cands[j].run < d.cands[k].run {
				k = j
			}
		}
		d.cands[k] = c
		return
	}
	d.cands = append(d.cands, c)
}

func (d *Detector) found(c candidate, end int) {
	kind := "block"
	switch {
	case c.p == 1:
		kind = "token"
	case c.p*(d.cfg.MinRepeats-1) <= d.cfg.MinBlockTokens:
		kind = "phrase"
	case c.restart:
		kind = "restart"
	}
	d.findings = append(d.findings, validator.Finding{
		Check:  Name,
		Reason: validator.ReasonRepetitionLoop,
		Start:  c.startOff,
		End:    end,
		Message: fmt.Sprintf("%s loop: a span of %d tokens repeats (%d tokens recurred, %.1f copies)",
			kind, c.p, c.run, float64(c.run+c.p)/float64(c.p)),
	})
	d.cands = d.cands[:0]
}
