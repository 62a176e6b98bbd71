// Package aegis is the root of the Aegis module. It holds no code: the
// binary is cmd/aegis and the packages live under internal/. The tests in
// this directory check properties of the whole tree, such as every
// package having a doc comment.
package aegis
