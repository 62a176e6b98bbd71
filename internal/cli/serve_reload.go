package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/aegis-sentinel/aegis/internal/gateway"
	"github.com/aegis-sentinel/aegis/internal/logging"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// liveGateway serves the API with the gateway of the last configuration
// that loaded. A request keeps the gateway it started on (its policy and
// upstreams) to its end, whatever reloads meanwhile.
type liveGateway struct {
	cur atomic.Pointer[gateway.Gateway]
}

func (l *liveGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { l.cur.Load().ServeHTTP(w, r) }

// reloadFiles are the files given on the command line.
type reloadFiles struct{ config, policy string }

// reloadDebounce gathers the several events an editor's save makes
// (write, rename, chmod) into one reload.
const reloadDebounce = 200 * time.Millisecond

// reloader loads the configuration and policy again on SIGHUP and when
// either file changes, and swaps the gateway new requests get. A
// configuration that does not load is refused, with its file and line in
// the log, and the running one stays.
type reloader struct {
	files  reloadFiles
	policy string // --policy, which wins over the config's
	load   func() (*serveConfig, error)
	b      *gatewayBuilder
	live   *liveGateway
	log    *slog.Logger
	first  *serveConfig // what a reload cannot change without a restart

	total *prometheus.CounterVec

	mu     sync.Mutex
	status reloadStatus
}

// reloadStatus is what the dashboard shows of the configuration.
type reloadStatus struct {
	Files     []string  `json:"files"`
	LoadedAt  time.Time `json:"loaded_at"`
	Reloads   int       `json:"reloads"`
	Failures  int       `json:"failures"`
	LastError string    `json:"last_error,omitempty"`
	FailedAt  time.Time `json:"failed_at,omitzero"`
	Policy    string    `json:"policy"`
}

func newReloader(files reloadFiles, cfg *serveConfig, policyPath string, load func() (*serveConfig, error), b *gatewayBuilder,
	live *liveGateway, log *slog.Logger, obs *observability) *reloader {
	r := &reloader{files: files, policy: policyPath, load: load, b: b, live: live, log: log, first: cfg,
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aegis_config_reloads_total",
			Help: "Reloads of the configuration and policy (SIGHUP or a changed file), by result: ok, or failed (the running configuration stayed)."},
			[]string{"result"})}
	r.total.WithLabelValues("ok")
	r.total.WithLabelValues("failed")
	obs.Metrics.Registry().MustRegister(r.total)
	r.status = reloadStatus{Files: r.watched(cfg), LoadedAt: time.Now(), Policy: live.cur.Load().Policy.Source}
	obs.Dashboard.Config = func() any { return r.snapshot() }
	return r
}

func (r *reloader) snapshot() reloadStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// watched lists the files whose change reloads: the config and the
// policy file it names, or --policy.
func (r *reloader) watched(cfg *serveConfig) []string {
	var fs []string
	if r.files.config != "" {
		fs = append(fs, r.files.config)
	}
	switch {
	case r.policy != "":
		fs = append(fs, r.policy)
	case cfg != nil && cfg.Policy.Kind == yaml.ScalarNode && cfg.Policy.Value != "":
		fs = append(fs, cfg.Policy.Value)
	}
	for i, f := range fs {
		if abs, err := filepath.Abs(f); err == nil {
			fs[i] = abs
		}
	}
	return fs
}

// reload builds the gateway of the files as they are now and serves it to
// new requests. It reports why it refused them.
func (r *reloader) reload(ctx context.Context, why string) error {
	notifyReloading()
	defer notifyReady()
	done, err := r.try(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.total.WithLabelValues("failed").Inc()
		r.status.Failures++
		r.status.LastError, r.status.FailedAt = err.Error(), time.Now()
		r.log.Error("configuration not reloaded; the running one stays", "trigger", why, "err", err.Error())
		return err
	}
	r.total.WithLabelValues("ok").Inc()
	r.status.Reloads++
	r.status.LastError, r.status.FailedAt = "", time.Time{}
	r.status.LoadedAt = time.Now()
	r.status.Policy = r.live.cur.Load().Policy.Source
	// The outcome is logged once it shows in the metrics and the status,
	// as a refusal is: who reads the log sees them agree.
	r.log.Info(done)
	return nil
}

// try builds and serves the new gateway; it returns the line that logs
// the reload.
func (r *reloader) try(ctx context.Context) (string, error) {
	cfg, err := r.load()
	if err != nil {
		return "", err
	}
	cfg.Incidents.gateway = r.first.Incidents.gateway
	changed := restartOnly(r.first, cfg)
	// The guard server and the fleet live as long as the process: the
	// checks built for them keep the running settings.
	cfg.GuardServer, cfg.Fleet = r.first.GuardServer, r.first.Fleet
	pol, err := servePolicy(cfg, r.policy)
	if err != nil {
		return "", err
	}
	input, err := serveInputGuard(pol, cfg.GuardClassifier)
	if err != nil {
		return "", err
	}
	g, names, err := r.b.build(ctx, cfg, pol, input)
	if err != nil {
		return "", err
	}
	r.live.cur.Store(g)
	r.mu.Lock()
	r.status.Files = r.watched(cfg)
	r.mu.Unlock()
	for _, f := range changed {
		r.log.Warn("configuration changed where only a restart applies it; the running value stays", "key", f)
	}
	return fmt.Sprintf("configuration reloaded: guarding %v with policy %s", names, pol.Source), nil
}

// restartOnly names the keys whose change a reload does not apply: the
// listener, the token, the incident log, the log format, the guard
// server and the fleet live as long as the process.
func restartOnly(was, now *serveConfig) []string {
	var keys []string
	if was.Listen != now.Listen {
		keys = append(keys, "listen")
	}
	if was.Auth != now.Auth {
		keys = append(keys, "auth")
	}
	if !reflect.DeepEqual(was.Incidents, now.Incidents) {
		keys = append(keys, "incidents")
	}
	if was.LogFormat != now.LogFormat {
		keys = append(keys, "log_format")
	}
	if !reflect.DeepEqual(was.GuardServer, now.GuardServer) {
		keys = append(keys, "guard_server")
	}
	if !reflect.DeepEqual(was.Fleet, now.Fleet) {
		keys = append(keys, "fleet")
	}
	return keys
}

// start reloads on SIGHUP and on changes to the watched files until ctx
// ends; the returned channel closes when it stopped.
func (r *reloader) start(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		r.log.Warn("not watching the configuration files; SIGHUP still reloads", "err", err.Error())
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w != nil {
		events, errs = w.Events, w.Errors
	}
	dirs := map[string]bool{}
	watch := func() map[string]bool {
		want := map[string]bool{}
		for _, f := range r.snapshot().Files {
			want[f] = true
			// The directory is watched: editors and config managers
			// replace a file by renaming another over it.
			if d := filepath.Dir(f); w != nil && !dirs[d] {
				if err := w.Add(d); err != nil {
					r.log.Warn("not watching a configuration directory", "dir", d, "err", err.Error())
					continue
				}
				dirs[d] = true
			}
		}
		return want
	}
	files := watch()
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		if w != nil {
			defer w.Close()
		}
		var timer *time.Timer
		var fire <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				if timer != nil {
					timer.Stop()
				}
				return
			case <-hup:
				r.reload(ctx, "SIGHUP")
				files = watch()
			case ev := <-events:
				if !files[filepath.Clean(ev.Name)] || ev.Op == fsnotify.Chmod {
					continue
				}
				if timer == nil {
					timer = time.NewTimer(reloadDebounce)
				} else {
					timer.Reset(reloadDebounce)
				}
				fire = timer.C
			case <-fire:
				fire = nil
				r.reload(ctx, "file changed")
				files = watch()
			case err := <-errs:
				r.log.Warn("watching the configuration files", "err", err.Error())
			}
		}
	}()
	return done
}

// checkServe is serve --check: it loads the configuration and the policy
// with every check they name, as serve would, and exits.
func checkServe(stdio *IO, cfg *serveConfig, policyPath string) error {
	if _, err := listenAddr(cfg.Listen); err != nil {
		return usageErr(err)
	}
	if _, err := logging.ParseFormat(cfg.LogFormat); err != nil {
		return usageErr(err)
	}
	if _, err := cfg.keepAlive(); err != nil {
		return err
	}
	pol, err := servePolicy(cfg, policyPath)
	if err != nil {
		return usageErr(err)
	}
	if _, err := serveInputGuard(pol, cfg.GuardClassifier); err != nil {
		return err
	}
	for i, uc := range cfg.Upstreams {
		name := uc.Name
		if name == "" {
			name = fmt.Sprintf("upstream%d", i+1)
		}
		if _, err := upstream.ParseKind(uc.Kind); err != nil {
			return usagef("upstream %s: %v", name, err)
		}
		base, _, err := upstream.Normalize(uc.URL)
		if err != nil {
			return usagef("upstream %s: %v", name, err)
		}
		if _, err := upstream.New(name, base, upstream.KindUnknown); err != nil {
			return usageErr(err)
		}
	}
	if cfg.Auth.TokenFile != "" {
		if _, err := os.ReadFile(cfg.Auth.TokenFile); err != nil {
			return usagef("auth token: %v", err)
		}
	}
	fmt.Fprintf(stdio.Out, "configuration OK: %d upstream(s), policy %s\n", len(cfg.Upstreams), pol.Source)
	return nil
}

// keepAlive reads keep_alive: a positive duration, or off (a negative
// KeepAlive for the gateway); empty is the gateway's default.
func (c *serveConfig) keepAlive() (time.Duration, error) {
	switch c.KeepAlive {
	case "":
		return 0, nil
	case "off":
		return -1, nil
	}
	d, err := time.ParseDuration(c.KeepAlive)
	if err != nil || d <= 0 {
		return 0, usagef("keep_alive: %q is not a positive duration (such as 15s) or off", c.KeepAlive)
	}
	return d, nil
}
