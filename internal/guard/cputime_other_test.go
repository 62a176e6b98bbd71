//go:build !linux

package guard

import "time"

// processCPU is not measured off Linux.
func processCPU() (time.Duration, bool) { return 0, false }
