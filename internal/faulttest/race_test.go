//go:build race

package faulttest

// raceOn: the race detector multiplies memory use, so RSS bounds are
// reported but not asserted under it.
const raceOn = true
