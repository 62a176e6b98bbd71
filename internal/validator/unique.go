package validator

// UniqueFindings returns findings without repeats: a finding with the same
// reason over the same span (and JSON path) as an earlier one says the same
// thing again, whichever check said it (json_syntax enabled both by the
// policy and by the request's response_format, a schema check that also
// sees the syntax error). The first is kept; notes (no reason) are kept
// unless exactly repeated. The slice is not modified; nil stays nil.
func UniqueFindings(fs []Finding) []Finding {
	type key struct {
		reason     Reason
		start, end int
		path       string
		check, msg string
	}
	seen := make(map[key]bool, len(fs))
	out := fs[:0:0]
	dup := false
	for _, f := range fs {
		k := key{reason: f.Reason, start: f.Start, end: f.End, path: f.Path}
		if f.Reason == ReasonNone {
			k.check, k.msg = f.Check, f.Message
		}
		if seen[k] {
			dup = true
			continue
		}
		seen[k] = true
		out = append(out, f)
	}
	if !dup {
		return fs
	}
	return out
}
