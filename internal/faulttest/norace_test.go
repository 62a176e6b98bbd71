//go:build !race

package faulttest

const raceOn = false
