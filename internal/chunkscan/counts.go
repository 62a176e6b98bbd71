package chunkscan

import "math"

// Counts are the token counts a stream's closing chunk may carry.
type Counts struct {
	// Usage is usage.completion_tokens (OpenAI-compatible servers).
	Usage int64
	// Predicted is timings.predicted_n (llama-server).
	Predicted int64
	// Eval is eval_count (Ollama).
	Eval int64
}

var (
	countsNames    = []string{"usage", "timings", "eval_count"}
	usageNames     = []string{"completion_tokens"}
	predictedNames = []string{"predicted_n"}
)

// ReadCounts reads the token counts of the chunk p into out, exactly as
// encoding/json decodes p into a struct with an optional usage object
// (completion_tokens int), an optional timings object (predicted_n int)
// and eval_count int: p must be valid JSON, an object or null; a count
// must be an integer that fits an int; a null object or a count missing
// reads as 0. Any fault is an error (encoding/json's error for it), and
// out is then not to be used.
func ReadCounts(p []byte, out *Counts) error {
	*out = Counts{}
	s := scanner{p: p}
	var err error
	switch s.peek() {
	case '{':
		err = s.countsTop(out)
	case 'n':
		err = s.literal("null")
	default:
		if err = s.skip(1); err == nil {
			err = s.fail("chunk is not a JSON object")
		}
	}
	if err != nil {
		return err
	}
	s.ws()
	if s.i != len(p) {
		return s.fail("data after the chunk's JSON value")
	}
	return nil
}

func (s *scanner) countsTop(out *Counts) error {
	if err := s.enter(1); err != nil {
		return err
	}
	for first := true; ; first = false {
		name, esc, more, err := s.member(first)
		if err != nil || !more {
			return err
		}
		switch lookup(name, esc, countsNames) {
		case 0:
			err = s.countObject(&out.Usage, usageNames)
		case 1:
			err = s.countObject(&out.Predicted, predictedNames)
		case 2:
			err = s.intOrNull(&out.Eval)
		default:
			err = s.skip(2)
		}
		if err != nil {
			return err
		}
	}
}

// countObject reads an optional object holding one count, named by
// names[0]: null drops the object (the count reads 0), an object is
// merged into the one an earlier member left.
func (s *scanner) countObject(dst *int64, names []string) error {
	switch s.peek() {
	case 'n':
		*dst = 0
		return s.literal("null")
	case '{':
	default:
		return s.fail("want an object")
	}
	if err := s.enter(2); err != nil {
		return err
	}
	for first := true; ; first = false {
		name, esc, more, err := s.member(first)
		if err != nil || !more {
			return err
		}
		if lookup(name, esc, names) == 0 {
			err = s.intOrNull(dst)
		} else {
			err = s.skip(3)
		}
		if err != nil {
			return err
		}
	}
}

// intOrNull reads a Go int member: null leaves *dst as it was.
func (s *scanner) intOrNull(dst *int64) error {
	if err := s.int64OrNull(dst); err != nil {
		return err
	}
	if *dst < math.MinInt || *dst > math.MaxInt {
		return s.fail("want an integer that fits an int")
	}
	return nil
}
