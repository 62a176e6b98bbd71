package cli

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestLabelledMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aegis_test_total", Help: "test"}, []string{"outcome"})
	reg.MustRegister(c)
	c.WithLabelValues("released").Add(3)
	rec := httptest.NewRecorder()
	labelled(reg, "gw-a").ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if want := `aegis_test_total{gateway="gw-a",outcome="released"} 3`; !strings.Contains(string(body), want) {
		t.Errorf("metrics lack %s:\n%s", want, body)
	}
}

func TestGatewayName(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fc     fleetConfig
		listen string
		want   string
	}{
		{"configured", fleetConfig{Name: "gw-a"}, "127.0.0.1:8088", "gw-a"},
		{"host and port", fleetConfig{}, "127.0.0.1:8088", "-8088"},
		{"any port", fleetConfig{}, "127.0.0.1:0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.fc.gatewayName(tc.listen)
			if !strings.HasSuffix(got, tc.want) || got == "" {
				t.Errorf("gatewayName(%q) = %q, want …%q", tc.listen, got, tc.want)
			}
		})
	}
}
