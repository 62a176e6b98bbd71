package gateway

import "encoding/json"

// splitBody reads a request body as a top-level JSON object, without
// validating it: for a valid body the result is what json.Unmarshal into
// a rawBody gives, error text included, but the body is split into its
// members with one light pass instead of a full decode. The members are
// slices of raw (capacity-capped, so an append never writes into raw),
// not copies. Whoever takes an invalid body further must validate it and
// answer with bodyError.
func splitBody(raw []byte) (rawBody, error) {
	if b, ok := splitObject(raw); ok {
		return b, nil
	}
	var b rawBody
	err := json.Unmarshal(raw, &b)
	return b, err
}

// bodyError is encoding/json's account of why raw is not a JSON object.
func bodyError(raw []byte) error {
	var b rawBody
	return json.Unmarshal(raw, &b)
}

// splitObject splits raw into the members of its top-level object; for
// valid JSON the split is exact, for invalid JSON it may be anything. It gives up (false) where encoding/json would
// transform something: a body that is not an object, and member names
// with escapes or non-ASCII bytes (which json unescapes or repairs).
func splitObject(raw []byte) (rawBody, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	b := rawBody{}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return b, true
	}
	for i < len(raw) {
		if raw[i] != '"' {
			return nil, false
		}
		start := i + 1
		end := start
		for end < len(raw) && raw[end] != '"' {
			if c := raw[end]; c == '\\' || c >= 0x80 {
				return nil, false
			}
			end++
		}
		if end >= len(raw) {
			return nil, false
		}
		name := string(raw[start:end])
		i = skipSpace(raw, end+1)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		i = skipSpace(raw, i+1)
		vEnd := valueEnd(raw, i)
		if vEnd <= i {
			return nil, false
		}
		b[name] = json.RawMessage(raw[i:vEnd:vEnd])
		i = skipSpace(raw, vEnd)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case '}':
			return b, true
		case ',':
			i = skipSpace(raw, i+1)
		default:
			return nil, false
		}
	}
	return nil, false
}

func skipSpace(p []byte, i int) int {
	for i < len(p) {
		switch p[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// valueEnd returns the end of the valid JSON value starting at p[i]: a
// string, an object or array (brackets counted outside strings), or a
// literal or number (up to the next delimiter).
func valueEnd(p []byte, i int) int {
	if i >= len(p) {
		return i
	}
	switch p[i] {
	case '"':
		return stringEnd(p, i)
	case '{', '[':
		depth := 0
		for i < len(p) {
			switch p[i] {
			case '"':
				i = stringEnd(p, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(p) {
		switch p[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// stringEnd returns the index just past the string starting at p[i].
func stringEnd(p []byte, i int) int {
	for i++; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}
