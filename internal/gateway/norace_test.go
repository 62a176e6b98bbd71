//go:build !race

package gateway

// raceOn: under the race detector sync.Pool drops some of what it is
// given, so allocation counts that rely on pooling are not checked.
const raceOn = false
