package guard

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPU returns the CPU time the test process has used (all its
// threads, the garbage collector's included), or false when unknown.
func processCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
