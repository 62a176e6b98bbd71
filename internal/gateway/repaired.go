package gateway

import (
	"slices"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// noteRepair records that a repair (a hidden retry, a local fix) mended a
// failure for reason r: the answer's verdict names it ("repaired") so a
// client sees why it took more than one attempt.
func (x *exchange) noteRepair(r validator.Reason) {
	x.tally.repaired = true
	if r != validator.ReasonNone && !slices.Contains(x.tally.repairedFor, r) {
		x.tally.repairedFor = append(x.tally.repairedFor, r)
	}
}

// repairedReasons is what the verdict v of the answer says was repaired:
// nothing unless the answer passed after a repair.
func (x *exchange) repairedReasons(v validator.Verdict) []validator.Reason {
	if !x.tally.repaired || v.Verdict != validator.Pass {
		return nil
	}
	return slices.Clone(x.tally.repairedFor)
}
