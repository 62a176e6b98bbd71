package pipeline

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestCorpusSplitIndependence feeds every corpus output whole, in random
// pieces and byte by byte (for the shorter ones): the verdict's outcome
// and reason do not change, and the release point never moves backwards
// or past a failure.
func TestCorpusSplitIndependence(t *testing.T) {
	cases := loadCorpus(t)
	pol := corpusPolicy(t)
	r := rand.New(rand.NewPCG(7, 11))
	clk := clock.NewFake(time.Unix(0, 0))
	for _, c := range cases {
		ref, err := CheckCase(pol, &c.Case, 1)
		if err != nil {
			t.Fatal(err)
		}
		out := []byte(c.Output)
		for trial := 0; trial < 3; trial++ {
			a, err := New(pol, c.Request.ValidatorRequest(), Options{Clock: clk, Complete: true})
			if err != nil {
				t.Fatal(err)
			}
			last := 0
			for i := 0; i < len(out); {
				n := 1 + r.IntN(24)
				if trial == 2 && len(out) < 2000 {
					n = 1
				}
				end := min(len(out), i+n)
				a.Write(out[i:end])
				i = end
				rp := a.ReleasePoint()
				if rp < last || rp > a.Len() {
					t.Fatalf("%s: release point %d after %d (text %d)", c.IDString(), rp, last, a.Len())
				}
				last = rp
			}
			for i, tc := range c.ToolCalls {
				a.ToolCall(tc.Validator(i))
			}
			a.Close()
			v := a.Verdict(1)
			if v.Verdict != ref.Verdict || v.Reason != ref.Reason {
				t.Errorf("%s trial %d: %s/%s, whole %s/%s", c.IDString(), trial, v.Verdict, v.Reason, ref.Verdict, ref.Reason)
			}
			if v.Verdict == validator.Fail && a.Mode().String() == "watermark" {
				for _, f := range v.Findings {
					if f.Reason != "" && a.ReleasePoint() > f.Start && f.Start < len(out) {
						t.Errorf("%s: released %d past a failure at %d (%s)", c.IDString(), a.ReleasePoint(), f.Start, f.Check)
					}
				}
			}
		}
	}
}
