package gateway

import "sync"

// sync1 memoizes a constructor (the default policy is built once).
func sync1[T any](f func() T) func() T {
	var once sync.Once
	var v T
	return func() T {
		once.Do(func() { v = f() })
		return v
	}
}
