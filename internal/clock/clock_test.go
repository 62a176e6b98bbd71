package clock

import (
	"testing"
	"time"
)

func TestFakeFiresInOrder(t *testing.T) {
	f := NewFake(time.Unix(100, 0))
	a, b := f.NewTimer(2*time.Second), f.NewTimer(time.Second)
	f.Advance(999 * time.Millisecond)
	select {
	case <-b.C():
		t.Fatal("fired early")
	default:
	}
	f.Advance(time.Millisecond)
	if at := <-b.C(); !at.Equal(time.Unix(101, 0)) {
		t.Fatalf("fired at %v", at)
	}
	if !a.Stop() || a.Stop() {
		t.Fatal("Stop reports wrongly")
	}
	f.Advance(time.Hour)
	select {
	case <-a.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	a.Reset(0) // an expired deadline fires at once
	<-a.C()
	armed := f.Armed()
	b.Reset(time.Minute)
	select {
	case <-armed:
	default:
		t.Fatal("Reset did not signal Armed")
	}
	if n, ok := f.Next(); !ok || !n.Equal(f.Now().Add(time.Minute)) || len(f.Timers()) != 1 {
		t.Fatalf("next %v %v timers %v", n, ok, f.Timers())
	}
}

func TestResetDropsStaleValue(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	tm := f.NewTimer(time.Second)
	f.Advance(time.Second) // fired, value not read
	tm.Reset(time.Second)
	select {
	case <-tm.C():
		t.Fatal("a value from before Reset was delivered")
	default:
	}
	if Or(nil) != Real || Or(f) != f {
		t.Fatal("Or")
	}
}
