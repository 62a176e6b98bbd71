package llm

import (
	"net/url"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Call is one verdict a Guard asked its guard model for (prefills, which
// only warm the cache, are not calls).
type Call struct {
	// Device names where the call ran: Config.Device when set (the
	// supervised guard server's device), else the guard server's host:port,
	// or "nats" for guard workers.
	Device    string
	RequestID string
	Attempt   int
	Duration  time.Duration
	// Verdict is the model's verdict; nil when Err is set.
	Verdict *validator.Verdict
	Err     error
}

var (
	observersMu sync.RWMutex
	observers   = map[*func(Call)]struct{}{}
)

// ObserveCalls has f told of every guard call any Guard of this process
// makes, from the call's own goroutine (f must not block); aegis serve
// publishes them as guard-call events (aegis_guard_calls_total, the
// dashboard's guard panel). The returned function stops it.
func ObserveCalls(f func(Call)) (stop func()) {
	p := &f
	observersMu.Lock()
	observers[p] = struct{}{}
	observersMu.Unlock()
	return func() {
		observersMu.Lock()
		delete(observers, p)
		observersMu.Unlock()
	}
}

func observeCall(c Call) {
	observersMu.RLock()
	defer observersMu.RUnlock()
	for f := range observers {
		(*f)(c)
	}
}

// deviceLabel is the Device of c's calls.
func deviceLabel(c Config) string {
	switch {
	case c.Device != "":
		return c.Device
	case c.NATS != "":
		return "nats"
	}
	if u, err := url.Parse(c.URL); err == nil && u.Host != "" {
		return u.Host
	}
	return c.URL
}
