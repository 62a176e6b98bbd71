package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/approval"
	"github.com/aegis-sentinel/aegis/internal/auth"
	"github.com/aegis-sentinel/aegis/internal/dashboard"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/logging"
	"github.com/aegis-sentinel/aegis/internal/metrics"
	"github.com/aegis-sentinel/aegis/internal/store"
)

// incidentsConfig is the `incidents:` section of the serve config.
type incidentsConfig struct {
	// Path of the SQLite incident log, or a postgres:// URL shared by
	// several gateways; empty means store.DefaultPath().
	Path string `yaml:"path"`
	// Buffer bounds the incidents kept in memory while PostgreSQL is
	// unreachable; zero means store.DefaultBuffer.
	Buffer int `yaml:"buffer"`

	gateway string // this gateway's name in a shared log (serve_fleet.go)
	// MaxRows and MaxAge bound the log; zero means the defaults below,
	// negative means no limit.
	MaxRows int           `yaml:"max_rows"`
	MaxAge  time.Duration `yaml:"max_age"`
}

// Retention defaults for the incident log.
const (
	defaultIncidentRows = 100_000
	defaultIncidentAge  = 30 * 24 * time.Hour
)

// observability is everything aegis serve runs beside the gateway, all fed
// by one event bus: Prometheus metrics at /metrics, the live dashboard at
// /ui, the incident log and one log line per request.
type observability struct {
	Bus       *events.Bus
	Metrics   *metrics.Collector
	Dashboard *dashboard.Dashboard
	Incidents store.Log
	// Approvals holds the tool calls waiting for a person, across reloads.
	Approvals *approval.Queue
	// desk is where decisions are taken: this gateway's queue, or the
	// fleet's desk when the incident log is shared (serve_fleet.go).
	desk approval.Desk
	// metricsHandler, when set, serves /metrics instead of the
	// collector's own handler (serve_fleet.go adds a gateway label).
	metricsHandler http.Handler

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startObservability opens the incident log and starts the subscribers.
// Every subscription exists before it returns, so no event is missed.
func startObservability(log *slog.Logger, ic incidentsConfig) (*observability, error) {
	opts := store.Options{MaxRows: ic.MaxRows, MaxAge: ic.MaxAge, Buffer: ic.Buffer, Logger: log, Gateway: ic.gateway}
	if opts.MaxRows == 0 {
		opts.MaxRows = defaultIncidentRows
	}
	if opts.MaxAge == 0 {
		opts.MaxAge = defaultIncidentAge
	}
	opts.MaxRows, opts.MaxAge = max(opts.MaxRows, 0), max(opts.MaxAge, 0)
	path := ic.Path
	if path == "" {
		path = store.DefaultPath()
	}
	st, err := store.OpenLog(context.Background(), path, opts)
	if err != nil {
		return nil, fmt.Errorf("incident log: %w", err)
	}
	o := &observability{Bus: &events.Bus{}, Incidents: st, Approvals: &approval.Queue{}}
	o.Metrics = metrics.New(o.Bus)
	if pg, ok := st.(*store.Postgres); ok {
		registerIncidentBuffer(o.Metrics.Registry(), pg)
	}
	o.Dashboard = dashboard.New(o.Bus, st)
	o.Dashboard.Gateway = ic.gateway
	o.desk = o.Approvals.Desk()
	o.Dashboard.Approvals = o.desk
	rec := store.NewRecorder(st, o.Bus)
	rec.Logger = log
	rec.OnAdd = o.Dashboard.IncidentAdded
	reqlog := logging.NewRequestLog(log, o.Bus)

	ctx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	for _, run := range []func(context.Context){
		o.Metrics.Run,
		o.Dashboard.Run,
		func(ctx context.Context) { rec.Run(ctx) },
		reqlog.Run,
	} {
		o.wg.Add(1)
		go func() { defer o.wg.Done(); run(ctx) }()
	}
	return o, nil
}

// Handler serves /metrics, /ui and the approvals API beside api, which
// gets everything else. With a token set, /metrics, the approvals API and
// every dashboard page and feed require it too (a bearer header, or the dashboard's sign-in cookie).
func (o *observability) Handler(api http.Handler, token string) http.Handler {
	gate := &auth.Gate{Token: token}
	mux := http.NewServeMux()
	metricsHandler := o.Metrics.Handler()
	if o.metricsHandler != nil {
		metricsHandler = o.metricsHandler
	}
	mux.Handle("GET /metrics", gate.Protect(metricsHandler))
	mux.Handle("/ui", gate.Protect(o.Dashboard))
	mux.Handle("/ui/", gate.Protect(o.Dashboard))
	approvals := gate.Protect(approval.Handler(o.desk))
	mux.Handle(approval.Path, approvals)
	mux.Handle(approval.Path+"/", approvals)
	mux.Handle("/", api)
	return mux
}

// CloseStreams ends the dashboard's event streams, so an HTTP server
// shutdown does not wait on them. Call it before http.Server.Shutdown.
func (o *observability) CloseStreams() { o.Dashboard.Close() }

// Close stops the subscribers, lets the incident recorder write what it
// had buffered, and closes the incident log.
func (o *observability) Close() error {
	o.Dashboard.Close()
	o.cancel()
	o.wg.Wait()
	return o.Incidents.Close()
}
