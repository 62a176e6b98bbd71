package validator_test

import (
	"bytes"
	"fmt"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// wordCheck fails output that contains word. Write takes the output in
// any split (a match may straddle two writes), and Settled stays before
// a possible start of the word, so no text a later finding would cover is
// released.
type wordCheck struct {
	word     []byte
	buf      []byte
	findings []validator.Finding
}

func (c *wordCheck) Name() string { return "word" }

func (c *wordCheck) Write(p []byte) (int, error) {
	from := max(0, len(c.buf)-len(c.word)+1)
	c.buf = append(c.buf, p...)
	if i := bytes.Index(c.buf[from:], c.word); i >= 0 && len(c.findings) == 0 {
		c.findings = append(c.findings, validator.Finding{Check: "word", Reason: validator.ReasonBannedContent,
			Start: from + i, End: from + i + len(c.word), Message: fmt.Sprintf("the output says %q", c.word)})
	}
	return len(p), nil
}

func (c *wordCheck) Settled() int {
	if len(c.findings) > 0 {
		return c.findings[0].Start
	}
	return max(0, len(c.buf)-len(c.word)+1)
}

func (c *wordCheck) Close() {}

func (c *wordCheck) Findings() []validator.Finding { return c.findings }

// A check is registered with its spec and built per response; the
// output streams through Write, Settled says how much is cleared, and the
// findings say where the output failed.
func Example() {
	reg := &validator.Registry{}
	reg.Register(validator.Spec{Name: "word", Summary: "fails output that says a word",
		Reasons: []validator.Reason{validator.ReasonBannedContent},
		New: func(any, *validator.Request) (validator.Validator, error) {
			return &wordCheck{word: []byte("secret")}, nil
		}})
	spec, _ := reg.Lookup("word")
	v, _ := spec.New(nil, &validator.Request{})
	for _, p := range []string{"the sec", "ret is out"} {
		v.Write([]byte(p))
		fmt.Printf("wrote %q: settled %d\n", p, v.Settled())
	}
	v.Close()
	for _, f := range v.Findings() {
		fmt.Printf("%s at %d-%d: %s\n", f.Reason, f.Start, f.End, f.Message)
	}
	// Output:
	// wrote "the sec": settled 2
	// wrote "ret is out": settled 4
	// banned_content at 4-10: the output says "secret"
}
