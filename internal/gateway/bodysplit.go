package gateway

import (
	"encoding/json"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
)

// splitRequest reads a request body as a top-level JSON object: the
// result is what json.Unmarshal into a rawBody gives, error text included,
// but a valid body is split into its members with one light pass instead
// of a full decode. The members are slices of raw (capacity-capped, so an
// append never writes into raw), not copies. exact reports whether raw
// says exactly what its members say: each member name plain and given
// once, so the upstream, whatever its parser, reads the same request from
// raw as from the members encoded again.
func splitRequest(raw []byte) (b rawBody, exact bool, err error) {
	if b, n, ok := splitObject(raw); ok {
		return b, n == len(b), nil
	}
	err = json.Unmarshal(raw, &b)
	return b, false, err
}

// splitObject splits raw into the members of its top-level object with
// the chunk scanner, which validates raw whole on the way, and counts
// them (a name given twice counts twice). It gives up
// (false) on anything invalid, and where encoding/json would transform
// something: member names with escapes or non-ASCII bytes (which json
// unescapes or repairs).
func splitObject(raw []byte) (b rawBody, members int, ok bool) {
	b = rawBody{}
	plain := true
	err := chunkscan.Members(raw, func(name []byte, escaped bool, value []byte) {
		if escaped || !ascii(name) {
			plain = false
			return
		}
		members++
		b[string(name)] = json.RawMessage(value[:len(value):len(value)])
	})
	return b, members, err == nil && plain
}

func ascii(p []byte) bool {
	for _, c := range p {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
