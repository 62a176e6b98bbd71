// Package clock is the one time source Aegis's request lifecycle uses:
// the gateway, the attempt pipeline and the checks read the time and arm
// timers through a Clock, so tests drive a request's whole life with a
// Fake clock instead of waiting on the wall clock.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends on its channel once d has
	// passed.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer, as time.Timer.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
	// Reset stops the timer and arms it to fire after d. A value the
	// timer sent before Reset is never delivered after it.
	Reset(d time.Duration)
}

// Real is the wall clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return &realTimer{t: time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r *realTimer) C() <-chan time.Time { return r.t.C }
func (r *realTimer) Stop() bool          { return r.t.Stop() }

// Reset relies on Go 1.23 timer semantics: Reset discards a pending
// value, so no drain is needed.
func (r *realTimer) Reset(d time.Duration) { r.t.Reset(d) }

// After returns a channel that receives the time once d has passed on c,
// as time.After does on the wall clock. The timer cannot be stopped; use
// NewTimer where an early exit should release it.
func After(c Clock, d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// Or returns c, or Real when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Fake is a clock that moves only when told to. Timers fire, in order of
// their deadlines, when Advance or Set passes them. It is safe for
// concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	armed  chan struct{} // closed and replaced whenever a timer is armed
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start, armed: make(chan struct{})} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer arms a timer at Now()+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// Advance moves the time forward by d, firing the timers it passes.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the time to t (never backwards), firing the timers it passes.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Before(f.now) {
		return
	}
	f.now = t
	sort.SliceStable(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
	keep := f.timers[:0]
	for _, tm := range f.timers {
		if tm.at.After(t) {
			keep = append(keep, tm)
			continue
		}
		select {
		case tm.c <- tm.at:
		default:
		}
	}
	f.timers = keep
}

// Armed returns a channel closed the next time a timer is armed (created
// or reset): a test waits on it to know the code under test is waiting.
func (f *Fake) Armed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.armed
}

// Timers returns the deadlines of the armed timers.
func (f *Fake) Timers() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]time.Time, len(f.timers))
	for i, t := range f.timers {
		out[i] = t.at
	}
	return out
}

// Next returns the earliest armed timer's deadline, or false when none is
// armed.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var next time.Time
	for _, t := range f.timers {
		if next.IsZero() || t.at.Before(next) {
			next = t.at
		}
	}
	return next, !next.IsZero()
}

type fakeTimer struct {
	f  *Fake
	c  chan time.Time
	at time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.stopLocked()
}

func (t *fakeTimer) stopLocked() bool {
	for i, o := range t.f.timers {
		if o == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			return true
		}
	}
	return false
}

func (t *fakeTimer) Reset(d time.Duration) {
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	t.stopLocked()
	select { // a value sent before Reset is never delivered after it
	case <-t.c:
	default:
	}
	t.at = f.now.Add(d)
	if d <= 0 {
		t.c <- t.at
	} else {
		f.timers = append(f.timers, t)
	}
	close(f.armed)
	f.armed = make(chan struct{})
}
