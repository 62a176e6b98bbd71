package secretrules

import mbits "math/bits"

// maxRules bounds the rule set so that a rule mask is a fixed array.
const maxRules = 4 * 64

// bits is a set of rule indices.
type bits [maxRules / 64]uint64

func (b *bits) set(i int)   { b[i/64] |= 1 << (i % 64) }
func (b *bits) or(o *bits)  { b[0] |= o[0]; b[1] |= o[1]; b[2] |= o[2]; b[3] |= o[3] }
func (b *bits) empty() bool { return b[0]|b[1]|b[2]|b[3] == 0 }

func trailingZeros(x uint64) int { return mbits.TrailingZeros64(x) }

// automaton is an Aho-Corasick automaton over lower-cased bytes. Bytes
// that no keyword holds share class 0, so the table is states x classes
// (a few hundred states by some forty classes for gitleaks' keywords).
type automaton struct {
	class   [256]uint8
	classes int
	next    []int32 // state*classes + class -> state
	depth   []int32 // length of the string a state stands for
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
	a.next = make([]int32, len(nodes)*n)
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
					nodes[nx].fail = a.next[int(nodes[s].fail)*n+c]
				}
				a.next[int(s)*n+c] = nx
				queue = append(queue, nx)
			} else if s != 0 {
				a.next[int(s)*n+c] = a.next[int(nodes[s].fail)*n+c]
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
	return a
}

// scan feeds p from state st, adds the rules whose keywords end in p to
// hits, and returns the state after p and the index in p of the last
// byte that ended a keyword (-1 for none).
func (a *automaton) scan(st int32, p []byte, hits *bits) (int32, int) {
	last := -1
	n := int32(a.classes)
	for i, c := range p {
		st = a.next[st*n+int32(a.class[c])]
		if o := a.outAt[st]; o >= 0 {
			hits.or(&a.outs[o])
			last = i
		}
	}
	return st, last
}
