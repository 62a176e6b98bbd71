package dashboard

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
)

func TestFleetAPI(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fleet func() any
		want  string
	}{
		{"alone", nil, `{"enabled":false}`},
		{"in a fleet", func() any { return map[string]int{"members": 3} }, `{"members":3}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(&events.Bus{}, nil)
			d.Fleet = tc.fleet
			req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/ui/api/fleet", nil)
			req.RemoteAddr = "127.0.0.1:5000"
			rec := httptest.NewRecorder()
			d.ServeHTTP(rec, req)
			var got, want any
			json.Unmarshal(rec.Body.Bytes(), &got)
			json.Unmarshal([]byte(tc.want), &want)
			if rec.Code != http.StatusOK || !jsonEqual(got, want) {
				t.Errorf("GET /ui/api/fleet = %d %s, want %s", rec.Code, rec.Body, tc.want)
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
