//go:build race

package faulttest

// raceOn: the race detector adds shadow memory, so RSS bounds are looser
// under it.
const raceOn = true
