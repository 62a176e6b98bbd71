package bench

import (
	"math"
	"slices"
)

// Stat summarises repeated samples of one measurement.
type Stat struct {
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// CV is the coefficient of variation (stddev/mean).
	CV float64 `json:"cv"`
	// Samples are the measurements in the order they were taken.
	Samples []float64 `json:"samples,omitempty"`
}

func summarize(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	st := Stat{N: len(s), Min: s[0], Max: s[len(s)-1], Samples: slices.Clone(v)}
	var sum float64
	for _, x := range s {
		sum += x
	}
	st.Mean = sum / float64(len(s))
	if len(s)%2 == 1 {
		st.Median = s[len(s)/2]
	} else {
		st.Median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if len(s) > 1 && st.Mean != 0 {
		var ss float64
		for _, x := range s {
			ss += (x - st.Mean) * (x - st.Mean)
		}
		st.CV = math.Sqrt(ss/float64(len(s)-1)) / math.Abs(st.Mean)
	}
	return st
}

// Verdict labels of the interpretation table, applied to the measured
// guard-device / CPU speed ratio.
const (
	VerdictSlower       = "slower than CPU: not worth it"
	VerdictEqual        = "about equal: only if it frees the CPU"
	VerdictPlausible    = "plausible"
	VerdictUseful       = "clearly useful"
	VerdictStrong       = "strong"
	VerdictExperimental = "unstable: experimental"
	VerdictBaseline     = "baseline"
)

// UnstableCV is the sample variation above which a device's numbers are
// called unstable.
const UnstableCV = 0.35

// Interpret applies the interpretation table to ratio (device speed / CPU
// speed, >1 = faster than the CPU). A device clearly slower than the CPU
// is "not worth it" however noisy; otherwise unstable numbers make it
// "experimental".
func Interpret(ratio float64, unstable bool) string {
	switch {
	case ratio < 0.9:
		return VerdictSlower
	case unstable:
		return VerdictExperimental
	case ratio < 1.2:
		return VerdictEqual
	case ratio < 2:
		return VerdictPlausible
	case ratio < 3:
		return VerdictUseful
	}
	return VerdictStrong
}
