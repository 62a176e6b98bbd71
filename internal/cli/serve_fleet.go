package cli

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-sentinel/aegis/internal/fleet"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/guardnats"
	"github.com/aegis-sentinel/aegis/internal/store"
	"github.com/aegis-sentinel/aegis/internal/supervisor"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// fleetConfig is serve's optional membership in a fleet of gateways:
//
//	fleet:
//	  name: gw-a                    # this gateway's name (default host-port)
//	  nats: nats://10.0.0.5:4222    # publish events, join the fleet view
//	  guard_workers: llama-guard-3  # ask the guard workers of this model
type fleetConfig struct {
	Name         string `yaml:"name"`
	NATS         string `yaml:"nats"`
	GuardWorkers string `yaml:"guard_workers"`
}

// fleetFlags adds serve's fleet flags; they override the config.
func fleetFlags(c *cobra.Command, f *fleetConfig) {
	fl := c.Flags()
	fl.StringVar(&f.Name, "name", "", "this gateway's name in the fleet and the shared incident log (default host-port)")
	fl.StringVar(&f.NATS, "nats", "", "NATS server URL: publish live events for every gateway's /ui and aegis fleet, and reach guard workers")
	fl.StringVar(&f.GuardWorkers, "guard-workers", "", "ask the guard workers (aegis guard-worker) of this model over --nats; a --guard-model server answers while NATS is down")
}

func (f fleetConfig) merge(flags fleetConfig) fleetConfig {
	if flags.Name != "" {
		f.Name = flags.Name
	}
	if flags.NATS != "" {
		f.NATS = flags.NATS
	}
	if flags.GuardWorkers != "" {
		f.GuardWorkers = flags.GuardWorkers
	}
	return f
}

// startFleet joins the fleet when fleet.nats is set: the gateway's events
// go out on NATS, its dashboard shows every member, and guard_llm checks
// may name nats. Its metrics carry a gateway label then, and also when it
// shares a PostgreSQL incident log. With guard_workers,
// every request also gets a guard_llm check sent to those workers, with
// the local guard server as the fallback while NATS is
// unreachable. It returns the function that leaves.
func startFleet(ctx context.Context, cfg *serveConfig, obs *observability, log *slog.Logger) (func(), error) {
	fc := cfg.Fleet
	guardnats.Register(log)                                    // guard_llm checks in the policy may name nats
	if fc.NATS != "" || store.IsPostgres(cfg.Incidents.Path) { // one of several gateways
		obs.metricsHandler = labelled(obs.Metrics.Registry(), fc.gatewayName(cfg.Listen))
	}
	if fc.NATS == "" {
		if fc.GuardWorkers != "" {
			return nil, usagef("--guard-workers needs --nats")
		}
		return func() {}, nil
	}
	name := fc.gatewayName(cfg.Listen)
	nc, err := guardnats.Conn(fc.NATS, log)
	if err != nil {
		return nil, err
	}
	fctx, cancel := context.WithCancel(ctx)
	pub := fleet.NewGateway(nc, obs.Bus, name, cfg.Listen)
	done := make(chan struct{})
	go func() { defer close(done); pub.Run(fctx) }()
	view, err := fleet.Watch(fctx, nc, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	obs.Dashboard.Fleet = func() any {
		ms := view.Members()
		return struct {
			Members []fleet.Member `json:"members"`
			Total   fleet.Totals   `json:"total"`
		}{ms, fleet.Sum(ms)}
	}
	// The workers' guard check enters every gateway built (gatewayBuilder).
	log.Info("joined the fleet", "nats", fc.NATS, "gateway", name, "events", pub.Subject())
	return func() { cancel(); <-done }, nil
}

// workerExtra adds a guard_llm check that asks the guard workers of
// fc.GuardWorkers, falling back to the local guard server while NATS is
// unreachable, in place of the local-only check.
func workerExtra(sup *supervisor.Supervisor, gc guardServerConfig, fc fleetConfig, log *slog.Logger) func(*validator.Request) []validator.Validator {
	return func(req *validator.Request) []validator.Validator {
		c := llm.Config{NATS: fc.NATS, Model: fc.GuardWorkers, Kind: "llama-server", Task: gc.Task, Deadline: gc.Deadline}
		if sup != nil {
			c.URL = sup.URL()
		}
		return []validator.Validator{guardLLM(c, req, log)}
	}
}

// labelled serves reg's metrics with a gateway label on every series, so
// the metrics of a fleet's gateways stay apart when scraped together.
func labelled(reg *prometheus.Registry, name string) http.Handler {
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := reg.Gather()
		for _, mf := range mfs {
			for _, m := range mf.Metric {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String("gateway"), Value: proto.String(name)})
				slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
			}
		}
		return mfs, err
	})
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// gatewayName is the configured name, else the host name and the listen
// port, so gateways on one host differ.
func (f fleetConfig) gatewayName(listen string) string {
	if f.Name != "" {
		return f.Name
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "aegis"
	}
	if _, port, err := net.SplitHostPort(listen); err == nil && port != "0" {
		return host + "-" + port
	}
	return host
}

// registerIncidentBuffer exports the PostgreSQL log's in-memory buffer:
// how many incidents wait for the database, and how many were lost
// because the buffer was full.
func registerIncidentBuffer(reg prometheus.Registerer, pg *store.Postgres) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "aegis_incidents_buffered",
			Help: "Incidents kept in memory while the PostgreSQL incident log is unreachable."},
			func() float64 { return float64(pg.Buffered()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "aegis_incidents_lost_total",
			Help: "Incidents lost because the in-memory buffer was full while PostgreSQL was unreachable."},
			func() float64 { return float64(pg.Overflowed()) }),
	)
}
