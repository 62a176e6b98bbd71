package origin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestOriginAllowed(t *testing.T) {
	p := &Policy{AllowOrigins: []string{"https://app.example.com"}, AllowHosts: []string{"gw.internal"}}
	for _, tc := range []struct {
		name, origin, host string
		want               bool
	}{
		{"localhost any port", "http://localhost:3000", "127.0.0.1:8088", true},
		{"127.0.0.1", "https://127.0.0.1:5173", "127.0.0.1:8088", true},
		{"ipv6 loopback", "http://[::1]:80", "127.0.0.1:8088", true},
		{"sub.localhost", "http://app.localhost:8080", "127.0.0.1:8088", true},
		{"listed", "https://app.example.com", "127.0.0.1:8088", true},
		{"listed with slash", "https://app.example.com/", "127.0.0.1:8088", true},
		{"listed scheme differs", "http://app.example.com", "127.0.0.1:8088", false},
		{"foreign", "http://evil.example", "127.0.0.1:8088", false},
		{"null", "null", "127.0.0.1:8088", false},
		{"file scheme", "file://", "127.0.0.1:8088", false},
		{"own address", "http://192.168.1.5:8088", "192.168.1.5:8088", true},
		{"own allowed name", "http://gw.internal:8088", "gw.internal:8088", true},
		{"rebound name", "http://evil.example:8088", "evil.example:8088", false},
		{"localhost lookalike", "http://localhost.evil.example", "127.0.0.1:8088", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
			r.Host = tc.host
			if got := p.OriginAllowed(tc.origin, r); got != tc.want {
				t.Fatalf("OriginAllowed(%q, Host %q) = %v, want %v", tc.origin, tc.host, got, tc.want)
			}
		})
	}
}

func TestHostAllowed(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"localhost:8088", true}, {"LOCALHOST", true}, {"127.0.0.1:8088", true}, {"[::1]:8088", true},
		{"", true}, {"gw.internal", true}, {"evil.example:8088", false}, {"localhost.evil.example", false},
	} {
		if got := HostAllowed(tc.host, []string{"gw.internal"}); got != tc.want {
			t.Errorf("HostAllowed(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, o := range []string{"https://a.example", "http://localhost:3000", "*", "null"} {
		if err := (&Policy{AllowOrigins: []string{o}}).Validate(); err != nil {
			t.Errorf("%q refused: %v", o, err)
		}
	}
	for _, o := range []string{"a.example", "https://a.example/path", "https://", "https://u@a.example"} {
		if err := (&Policy{AllowOrigins: []string{o}}).Validate(); err == nil {
			t.Errorf("%q accepted", o)
		}
	}
	if err := (&Policy{AllowHosts: []string{"http://x"}}).Validate(); err == nil {
		t.Error("a URL accepted as a host")
	}
}

func TestWrap(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	h := (&Policy{CheckHost: true}).Wrap(next)
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"localhost:1", "", 200}, {"evil.example", "", 403}, {"localhost:1", "http://evil.example", 403},
		{"localhost:1", "http://localhost:2", 200},
	} {
		r := httptest.NewRequest("POST", "/", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("Host %q Origin %q: %d, want %d", tc.host, tc.origin, w.Code, tc.want)
		}
	}
	for path, want := range map[string]string{"/api/chat": `{"error":"Host`, "/v1/models": `{"error":{"code":"host_not_allowed"`} {
		r := httptest.NewRequest("GET", path, nil)
		r.Host = "evil.example"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 403 || !strings.HasPrefix(w.Body.String(), want) {
			t.Errorf("%s: %d %s, want the error shape %s", path, w.Code, w.Body.String(), want)
		}
	}
}

func FuzzOriginAllowed(f *testing.F) {
	for _, s := range []string{"http://localhost:3000", "null", "https://app.example.com", "http://[::1", "://", "http://%zz"} {
		f.Add(s, "127.0.0.1:8088")
	}
	p := &Policy{AllowOrigins: []string{"https://app.example.com"}}
	f.Fuzz(func(t *testing.T, origin, host string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		p.OriginAllowed(origin, r)
		HostAllowed(host, nil)
		(&Policy{AllowOrigins: []string{origin}, AllowHosts: []string{host}}).Validate()
	})
}
