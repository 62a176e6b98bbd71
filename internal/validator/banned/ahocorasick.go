package banned

// automaton is an Aho-Corasick automaton over bytes with a dense,
// byte-class-compressed transition table, so that matching costs one
// table lookup per byte and the state survives between chunks.
//
// It is hand-written on purpose: a streaming check must carry the matcher
// state from one chunk to the next. The Go packages for multi-string
// matching (github.com/cloudflare/ahocorasick,
// github.com/petar-dambovaliev/aho-corasick) match a complete haystack
// and expose no resumable state, so a chunk boundary would force
// re-scanning a window of the longest pattern's length on every chunk.
type automaton struct {
	classes  [256]uint8 // byte -> equivalence class
	nclasses int
	delta    []int32 // state*nclasses + class -> next state
	out      []int32 // state -> first pattern id ending here, -1 for none
	outNext  []int32 // state -> next state on the dictionary-suffix chain holding an output, -1 for none
	depth    []int32 // state -> length in runes of the path to it
	plen     []int   // pattern id -> length in runes
}

// buildAutomaton compiles the (already folded) patterns.
func buildAutomaton(patterns []string) *automaton {
	a := &automaton{}
	// Byte classes: each byte used in a pattern gets its own class, all
	// other bytes share class 0.
	a.nclasses = 1
	for _, p := range patterns {
		for i := 0; i < len(p); i++ {
			if a.classes[p[i]] == 0 {
				a.classes[p[i]] = uint8(a.nclasses)
				a.nclasses++
			}
		}
	}
	if a.nclasses > 255 {
		// More distinct bytes than classes: fall back to the identity.
		a.nclasses = 256
		for i := range a.classes {
			a.classes[i] = uint8(i)
		}
	}
	// Trie.
	type node struct {
		next  map[byte]int32
		out   int32
		depth int32
	}
	nodes := []node{{next: map[byte]int32{}, out: -1}}
	a.plen = make([]int, len(patterns))
	for id, p := range patterns {
		s := int32(0)
		runes := int32(0)
		for i := 0; i < len(p); i++ {
			if p[i]&0xC0 != 0x80 {
				runes++
			}
			nx, ok := nodes[s].next[p[i]]
			if !ok {
				nx = int32(len(nodes))
				nodes = append(nodes, node{next: map[byte]int32{}, out: -1, depth: runes})
				nodes[s].next[p[i]] = nx
			}
			s = nx
		}
		a.plen[id] = int(runes)
		if nodes[s].out < 0 {
			nodes[s].out = int32(id)
		}
	}
	n := len(nodes)
	nc := a.nclasses
	a.delta = make([]int32, n*nc)
	a.out = make([]int32, n)
	a.outNext = make([]int32, n)
	a.depth = make([]int32, n)
	fail := make([]int32, n)
	for i := range nodes {
		a.out[i] = nodes[i].out
		a.depth[i] = nodes[i].depth
		a.outNext[i] = -1
	}
	// Breadth-first: fill the full transition function.
	queue := make([]int32, 0, n)
	for b, nx := range nodes[0].next {
		a.delta[int(a.classes[b])] = nx
		fail[nx] = 0
		queue = append(queue, nx)
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		f := fail[s]
		if a.out[f] >= 0 {
			a.outNext[s] = f
		} else {
			a.outNext[s] = a.outNext[f]
		}
		for c := 0; c < nc; c++ {
			a.delta[int(s)*nc+c] = a.delta[int(f)*nc+c]
		}
		for b, nx := range nodes[s].next {
			fail[nx] = a.delta[int(f)*nc+int(a.classes[b])]
			a.delta[int(s)*nc+int(a.classes[b])] = nx
			queue = append(queue, nx)
		}
	}
	return a
}

func (a *automaton) step(s int32, b byte) int32 {
	return a.delta[int(s)*a.nclasses+int(a.classes[b])]
}
