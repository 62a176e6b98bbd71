package chunkscan

// Members walks p, which must be one JSON object and nothing else, and
// calls fn with each member's name (the bytes between its quotes;
// escaped is set when they hold an escape) and the bytes of its value, in
// order. It validates p whole, as json.Valid does, with the scanner the
// chunks are read with; the first fault ends the walk with an *Error.
func Members(p []byte, fn func(name []byte, escaped bool, value []byte)) error {
	s := scanner{p: p}
	if s.peek() != '{' {
		return s.fail("not a JSON object")
	}
	if err := s.enter(0); err != nil {
		return err
	}
	for first := true; ; first = false {
		name, esc, more, err := s.member(first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		s.ws()
		start := s.i
		if err := s.skip(1); err != nil {
			return err
		}
		fn(name, esc, p[start:s.i])
	}
	s.ws()
	if s.i != len(p) {
		return s.fail("data after the JSON value")
	}
	return nil
}
