package dashboard

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/store"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestTwoGatewaysOneIncidentLog: two local gateways write the same SQLite
// incident log (the default path); each incident is labelled with the
// gateway that recorded it, each dashboard lists its own by default, and
// ?gateway=* lists every gateway's.
func TestTwoGatewaysOneIncidentLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "incidents.db")
	dash := map[string]*Dashboard{}
	for _, gw := range []string{"box-8080", "box-8081"} {
		st, err := store.Open(path, store.Options{Gateway: gw})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if _, err := st.Add(context.Background(), &store.Incident{Kind: store.KindHalt, RequestID: "req-" + gw,
			Reason: validator.ReasonSecretLeak, Action: validator.ActionHalt, Risk: validator.RiskHigh}); err != nil {
			t.Fatal(err)
		}
		d := New(&events.Bus{}, st)
		d.Gateway = gw
		t.Cleanup(d.Close)
		dash[gw] = d
	}
	list := func(d *Dashboard, query string) []incidentView {
		req := httptest.NewRequest("GET", "/ui/api/incidents"+query, nil)
		req.Host, req.RemoteAddr = "localhost:8080", "127.0.0.1:40000"
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, req)
		var out struct {
			Incidents []incidentView `json:"incidents"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: %v", rec.Body, err)
		}
		return out.Incidents
	}
	for gw, d := range dash {
		own := list(d, "")
		if len(own) != 1 || own[0].RequestID != "req-"+gw || own[0].Gateway != gw {
			t.Errorf("%s lists %+v; want only its own incident, labelled", gw, own)
		}
		if all := list(d, "?gateway=*"); len(all) != 2 || all[0].Gateway == all[1].Gateway {
			t.Errorf("%s with gateway=*: %+v; want both, labelled", gw, all)
		}
	}
}
