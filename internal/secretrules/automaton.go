package secretrules

import mbits "math/bits"

// maxRules bounds the rule set so that a rule mask is a fixed array.
const maxRules = 4 * 64

// bits is a set of rule indices.
type bits [maxRules / 64]uint64

func (b *bits) set(i int)  { b[i/64] |= 1 << (i % 64) }
func (b *bits) or(o *bits) { b[0] |= o[0]; b[1] |= o[1]; b[2] |= o[2]; b[3] |= o[3] }
func (b *bits) orNot(o, not *bits) {
	b[0] |= o[0] &^ not[0]
	b[1] |= o[1] &^ not[1]
	b[2] |= o[2] &^ not[2]
	b[3] |= o[3] &^ not[3]
}
func (b *bits) empty() bool { return b[0]|b[1]|b[2]|b[3] == 0 }

func trailingZeros(x uint64) int { return mbits.TrailingZeros64(x) }

// automaton is an Aho-Corasick automaton over lower-cased bytes. Bytes
// that no keyword holds share class 0, so the table is states x classes
// (a few hundred states by some forty classes for gitleaks' keywords).
type automaton struct {
	class   [256]uint8
	classes int
	// trans maps state*classes + class to the next state, written as
	// its row (state*classes) with the sign bit set when it has outputs:
	// the scanning loop needs one load a byte and tests outputs without a
	// second one.
	trans []int32
	depth []int32 // length of the string a state stands for
	// out marks, by state, the rules whose keyword ends here (its own
	// and, through the failure links, its suffixes'); outAt indexes
	// outs, -1 for none.
	outAt  []int32
	outs   []bits
	maxKey int
}

func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func buildAutomaton(keywords []string, owners []int) automaton {
	var a automaton
	n := 1
	for _, k := range keywords {
		for i := 0; i < len(k); i++ {
			c := lowerByte(k[i])
			if a.class[c] == 0 {
				a.class[c] = uint8(n)
				n++
			}
		}
		a.maxKey = max(a.maxKey, len(k))
	}
	for c := 'A'; c <= 'Z'; c++ {
		a.class[c] = a.class[c+'a'-'A']
	}
	a.classes = n
	// The trie.
	type node struct {
		child map[uint8]int32
		out   bits
		has   bool
		fail  int32
		depth int32
	}
	nodes := []node{{child: map[uint8]int32{}}}
	for i, k := range keywords {
		s := int32(0)
		for j := 0; j < len(k); j++ {
			c := a.class[lowerByte(k[j])]
			nx, ok := nodes[s].child[c]
			if !ok {
				nx = int32(len(nodes))
				nodes = append(nodes, node{child: map[uint8]int32{}, depth: nodes[s].depth + 1})
				nodes[s].child[c] = nx
			}
			s = nx
		}
		nodes[s].out.set(owners[i])
		nodes[s].has = true
	}
	// Breadth-first: failure links and the dense table.
	next := make([]int32, len(nodes)*n) // state*classes + class -> state
	a.depth = make([]int32, len(nodes))
	queue := []int32{0}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		a.depth[s] = nodes[s].depth
		if f := nodes[s].fail; s != 0 && nodes[f].has {
			nodes[s].out.or(&nodes[f].out)
			nodes[s].has = true
		}
		for c := 0; c < n; c++ {
			if nx, ok := nodes[s].child[uint8(c)]; ok && c != 0 {
				if s != 0 {
					nodes[nx].fail = next[int(nodes[s].fail)*n+c]
				}
				next[int(s)*n+c] = nx
				queue = append(queue, nx)
			} else if s != 0 {
				next[int(s)*n+c] = next[int(nodes[s].fail)*n+c]
			}
		}
	}
	a.outAt = make([]int32, len(nodes))
	for i := range nodes {
		a.outAt[i] = -1
		if nodes[i].has {
			a.outAt[i] = int32(len(a.outs))
			a.outs = append(a.outs, nodes[i].out)
		}
	}
	a.trans = make([]int32, len(next))
	for i, st := range next {
		a.trans[i] = st * int32(n)
		if nodes[st].has {
			a.trans[i] |= outFlag
		}
	}
	return a
}

// outFlag marks a transition into a state with outputs.
const outFlag = -1 << 31

// scan feeds p from the start state and adds the rules whose keywords
// end in p to hits.
func (a *automaton) scan(p []byte, hits *bits) {
	row := int32(0)
	for _, c := range p {
		x := a.trans[row+int32(a.class[c])]
		row = x &^ outFlag
		if x < 0 {
			hits.or(&a.outs[a.outAt[row/int32(a.classes)]])
		}
	}
}
