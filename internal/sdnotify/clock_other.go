//go:build !linux

package sdnotify

// monotonicUsec is 0 where there is no systemd.
func monotonicUsec() int64 { return 0 }
