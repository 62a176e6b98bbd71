package cli

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/aegis-sentinel/aegis/internal/sdnotify"
)

// notifyServiceManager tells systemd (Type=notify or notify-reload) the
// gateway is ready, and while ctx lives feeds its watchdog (WatchdogSec)
// each time the gateway's own heartbeat (GET / on its listener) answers
// within the interval, so a gateway that stopped serving is restarted.
// Outside systemd it does nothing. It returns the function that stops
// the watchdog.
func notifyServiceManager(ctx context.Context, log *slog.Logger, heartbeat string) func() {
	if ok, err := sdnotify.Send(sdnotify.Ready); err != nil {
		log.Warn("telling the service manager the gateway is ready", "err", err.Error())
	} else if !ok {
		return func() {}
	}
	every, err := sdnotify.WatchdogInterval()
	if err != nil {
		log.Warn("watchdog", "err", err.Error())
	}
	if every <= 0 {
		return func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		client := &http.Client{Timeout: every}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			resp, err := client.Get(heartbeat)
			if err != nil {
				log.Warn("watchdog: the gateway's heartbeat did not answer; not feeding the watchdog", "err", err.Error())
				continue
			}
			resp.Body.Close()
			if _, err := sdnotify.Send(sdnotify.Watchdog); err != nil {
				log.Warn("watchdog", "err", err.Error())
			}
		}
	}()
	return func() { cancel(); <-done }
}

// notifyReloading, notifyReady and notifyStopping tell the service
// manager a reload began or ended, or the gateway is stopping.
func notifyReloading() { sdnotify.Send(sdnotify.ReloadingNow()) }
func notifyReady()     { sdnotify.Send(sdnotify.Ready) }
func notifyStopping()  { sdnotify.Send(sdnotify.Stopping) }
