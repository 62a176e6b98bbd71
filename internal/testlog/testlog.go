// Package testlog is the log sink a test shares with a server it runs in
// the same process: safe for the server's writes and the test's reads at
// once, and able to wake a test that waits for a line, so tests wait on
// the log's writes rather than on the clock.
package testlog

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer collects log output. The zero value is ready to use.
type Buffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // closed at the next Write; nil when nobody waits
}

// Write appends p and wakes whoever waits on Changed.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote != nil {
		close(l.wrote)
		l.wrote = nil
	}
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Changed returns a channel closed at the next Write: a test takes it,
// looks at the log, and waits on it when what it looks for is not there
// yet.
func (l *Buffer) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote == nil {
		l.wrote = make(chan struct{})
	}
	return l.wrote
}

// WaitFor waits until the log contains text, or until done yields (the
// command writing it ended first, with that exit code); it reports
// whether the text came. It has no clock of its own: go test's -timeout
// ends a wait that never ends.
func (l *Buffer) WaitFor(text string, done <-chan int) (int, bool) {
	for {
		changed := l.Changed()
		if strings.Contains(l.String(), text) {
			return 0, true
		}
		select {
		case <-changed:
		case code := <-done:
			return code, strings.Contains(l.String(), text)
		}
	}
}
