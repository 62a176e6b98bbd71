package pipeline

import (
	"testing"

	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestConstraintChecks: instructions in the prompt become checks of the
// attempt (through validator.Default, where instruct registers), and the
// policy's constraints switch turns them off.
func TestConstraintChecks(t *testing.T) {
	req := func() *validator.Request {
		return &validator.Request{Messages: []validator.Message{
			{Role: "user", Content: "Describe a dog. Do not use any commas."},
		}}
	}
	a, err := New(policy.Default(), req(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("A dog is loyal"))
	if a.Failed() {
		t.Fatal("failed before the comma")
	}
	a.Write([]byte(", playful and kind."))
	// The release point stops before the comma (other checks may hold
	// back more of the text before it).
	if !a.Failed() || a.ReleasePoint() > len("A dog is loyal") {
		t.Fatalf("failed %v, release point %d", a.Failed(), a.ReleasePoint())
	}
	v := a.Verdict(1)
	if v.Reason != validator.ReasonInstructionDrift || v.Action != validator.ActionRetryWithCorrection {
		t.Errorf("verdict %+v", v)
	}

	off, err := policy.Parse([]byte("constraints: false\n"), "off", validator.Default)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New(off, req(), Options{})
	b.Write([]byte("A dog, a cat."))
	b.Close()
	if b.Failed() {
		t.Error("constraints: false still compiled the prompt")
	}
}

// TestConstraintUnknownCheck: a compiled check this binary does not have
// (json_syntax before its package is linked) is skipped, not an error.
func TestConstraintUnknownCheck(t *testing.T) {
	reg := &validator.Registry{}
	p := policy.DefaultFor(reg)
	req := &validator.Request{Messages: []validator.Message{{Role: "user", Content: "Respond in JSON only. Use at most 10 words."}}}
	a, err := New(p, req, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Checks()) != 0 {
		t.Errorf("checks %v from an empty registry", a.Checks())
	}
}
