package validator

import "testing"

// TestUnavailableFollowsThePolicy: the stand-in for a guard that cannot
// judge reports the whole output as guard_unavailable, and lets it go only
// when the policy's rule releases unjudged text.
func TestUnavailableFollowsThePolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rule    Action
		settled int
	}{
		{"release", ActionRelease, 5},
		{"halt", ActionHalt, 0},
		{"outside a pipeline", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Unavailable("guard", "model not loaded", &Request{Unjudged: tc.rule})
			v.Write([]byte("hello"))
			fs := v.Findings()
			if v.Settled() != tc.settled || len(fs) != 1 || fs[0].Reason != ReasonGuardUnavailable || fs[0].End != 5 {
				t.Errorf("settled %d findings %+v, want settled %d and one guard_unavailable over the text", v.Settled(), fs, tc.settled)
			}
		})
	}
}
