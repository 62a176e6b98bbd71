package events

import (
	"encoding/json"
	"sync"
	"testing"
)

func TestBusFanOutAndDrop(t *testing.T) {
	tests := []struct {
		name      string
		buf, send int
		wantGot   int
		wantDrops uint64
	}{
		{name: "fits", buf: 4, send: 3, wantGot: 3},
		{name: "overflow drops, never blocks", buf: 2, send: 5, wantGot: 2, wantDrops: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Bus
			s := b.Subscribe(tt.buf)
			for i := 0; i < tt.send; i++ {
				b.Publish(Event{Kind: Verdict, RequestID: "r"})
			}
			s.Close()
			got := 0
			for range s.C {
				got++
			}
			if got != tt.wantGot || b.Dropped() != tt.wantDrops {
				t.Fatalf("got %d events, %d drops; want %d, %d", got, b.Dropped(), tt.wantGot, tt.wantDrops)
			}
		})
	}
}

func TestNilBusAndConcurrentUse(t *testing.T) {
	var nb *Bus
	nb.Publish(Event{}) // must not panic
	var b Bus
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := b.Subscribe(16)
			for j := 0; j < 100; j++ {
				b.Publish(Event{Kind: RequestStarted})
			}
			s.Close()
			s.Close()
		}()
	}
	wg.Wait()
}

func TestKindString(t *testing.T) {
	for k := RequestStarted; k <= GuardStatus; k++ {
		if k.String() == "unknown" {
			t.Errorf("kind %d has no name", k)
		}
	}
}

func TestKindJSONRoundTrip(t *testing.T) {
	for k := RequestStarted; k <= GuardStatus; k++ {
		b, err := json.Marshal(Event{Kind: k, RequestID: "r"})
		if err != nil {
			t.Fatal(err)
		}
		var e Event
		if err := json.Unmarshal(b, &e); err != nil || e.Kind != k {
			t.Errorf("%s: decoded %v, %v", k, e.Kind, err)
		}
	}
	var e Event
	if err := json.Unmarshal([]byte(`{"kind":"bogus"}`), &e); err == nil {
		t.Error("unknown kind decoded without error")
	}
}
