package cli

import (
	"net"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-sentinel/aegis/internal/store"
)

// fleetConfig is serve's optional membership in a fleet of gateways:
//
//	fleet:
//	  name: gw-a                  # this gateway's name (default host-port)
type fleetConfig struct {
	Name string `yaml:"name"`
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
