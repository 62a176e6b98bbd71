// Package faulttest is the gateway's fault suite: a scriptable upstream
// that stalls, sends garbage or invalid UTF-8, closes mid-chunk, refuses,
// trickles or floods, and hostile clients that trickle bodies, stop
// reading or leave. Every case checks that the client got exactly the
// text the upstream sent (nothing lost, nothing twice), a clear outcome,
// and that no goroutine, descriptor or memory is left behind. The package
// holds only tests; `make test` runs them with the rest.
package faulttest
