package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/store"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestIncidentsPostgres reads a shared PostgreSQL log written by two
// gateways, whole and per gateway.
func TestIncidentsPostgres(t *testing.T) {
	pg := testbed.StartPostgres(t)
	for _, gw := range []string{"gw-a", "gw-b"} {
		st, err := store.OpenPostgres(context.Background(), pg.URL, store.Options{Gateway: gw})
		if err != nil {
			t.Fatal(err)
		}
		inc := &store.Incident{Kind: store.KindHalt, RequestID: "req-" + gw, Reason: validator.ReasonSecretLeak,
			Action: validator.ActionHalt, Risk: validator.RiskHigh}
		if _, err := st.Add(context.Background(), inc); err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		notWant []string
		code    int
	}{
		{"both gateways", []string{"incidents", "--incidents-db", pg.URL}, []string{"req-gw-a", "req-gw-b"}, nil, 0},
		{"one gateway", []string{"incidents", "--incidents-db", pg.URL, "--gateway", "gw-b"}, []string{"req-gw-b"}, []string{"req-gw-a"}, 0},
		{"show", []string{"incidents", "--incidents-db", pg.URL, "show", "1"}, []string{"req-gw-a", "secret_leak"}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("stdout has %q:\n%s", w, out)
				}
			}
		})
	}
}
