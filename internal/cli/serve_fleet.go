package cli

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-sentinel/aegis/internal/clock"
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
// unreachable. With a PostgreSQL incident log, the approvals API, aegis
// approvals and the dashboard decide the held calls of every gateway that
// shares it (startApprovals). It returns the function that leaves.
func startFleet(ctx context.Context, cfg *serveConfig, obs *observability, log *slog.Logger) (func(), error) {
	fc := cfg.Fleet
	guardnats.Register(log) // guard_llm checks in the policy may name nats
	name := fc.gatewayName(cfg.Listen)
	pg, shared := obs.Incidents.(*store.Postgres)
	if fc.NATS != "" || shared { // one of several gateways
		obs.metricsHandler = labelled(obs.Metrics.Registry(), name)
	}
	if fc.NATS == "" && fc.GuardWorkers != "" {
		return nil, usagef("--guard-workers needs --nats")
	}
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	leave := func() { cancel(); wg.Wait() }
	var nc *nats.Conn
	if fc.NATS != "" {
		var err error
		if nc, err = guardnats.Conn(fc.NATS, log); err != nil {
			cancel()
			return nil, err
		}
		pub := fleet.NewGateway(nc, obs.Bus, name, cfg.Listen)
		wg.Add(1)
		go func() { defer wg.Done(); pub.Run(fctx) }()
		view, err := fleet.Watch(fctx, nc, nil)
		if err != nil {
			leave()
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
	}
	if shared {
		startApprovals(fctx, &wg, obs, pg, nc, name, cfg.clock, log)
	}
	return leave, nil
}

// startApprovals makes the fleet's approvals the desk of the approvals
// API, aegis approvals and the dashboard: every gateway sharing the
// PostgreSQL incident log lists and decides the others' held calls, and
// this one releases or refuses its own when a decision is taken
// elsewhere: at once on a NATS notice (nc, when the fleet has NATS), and
// by polling the store in any case. It runs until ctx ends (wg.Done).
func startApprovals(ctx context.Context, wg *sync.WaitGroup, obs *observability, pg *store.Postgres, nc *nats.Conn,
	name string, clk clock.Clock, log *slog.Logger) {
	fa := fleet.NewApprovals(fleet.ApprovalsConfig{Queue: obs.Approvals, Shared: pg.Approvals(), Gateway: name,
		Bus: obs.Bus, NATS: nc, Clock: clk, Logger: log})
	fa.Changed = obs.Dashboard.ApprovalsChanged
	obs.desk, obs.Dashboard.Approvals = fa, fa
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := fa.Run(ctx); err != nil {
			log.Error("approvals: deciding other gateways' held calls is off", "err", err)
		}
	}()
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
