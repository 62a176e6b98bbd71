package gateway

import (
	"context"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// ensureKinds detects the kinds still unknown. Requests that find some
// unknown wait for one another here, so each upstream is probed by one
// request at a time and u.Kind is written only under the lock; once all
// are known, the check is one atomic load.
func (g *Gateway) ensureKinds(ctx context.Context) {
	g.kinds.once.Do(func() {
		for _, u := range g.Upstreams {
			if u.Kind == upstream.KindUnknown {
				g.kinds.pending.Store(true)
			}
		}
	})
	if !g.kinds.pending.Load() {
		return
	}
	g.kinds.mu.Lock()
	defer g.kinds.mu.Unlock()
	left := false
	for _, u := range g.Upstreams {
		if u.Kind != upstream.KindUnknown {
			continue
		}
		k, err := upstream.Detect(ctx, u)
		if err != nil {
			left = true
			continue
		}
		u.Kind = k
		g.logf("upstream %s answered: detected %s", u.Name, k)
	}
	if !left {
		g.kinds.pending.Store(false)
	}
}
