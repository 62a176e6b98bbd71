package testlog

import (
	"sync"
	"testing"
)

func TestWaitForWakesOnWrite(t *testing.T) {
	var l Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, s := range []string{"starting\n", "still starting\n", "listening on x\n"} {
			l.Write([]byte(s))
		}
	}()
	if _, ok := l.WaitFor("listening on", nil); !ok {
		t.Fatal("WaitFor returned without the line")
	}
	wg.Wait()
}

func TestWaitForEndsWhenTheWriterDoes(t *testing.T) {
	var l Buffer
	done := make(chan int, 1)
	l.Write([]byte("fatal: no model\n"))
	done <- 2
	if code, ok := l.WaitFor("listening on", done); ok || code != 2 {
		t.Fatalf("WaitFor = %d, %v; want the exit code 2 and no line", code, ok)
	}
}
