package auth

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

var bearerCases = []struct {
	name   string
	header string
	tok    string
	ok     bool
}{
	{"canonical", "Bearer abc", "abc", true},
	{"lower-case scheme", "bearer abc", "abc", true},
	{"upper-case scheme", "BEARER abc", "abc", true},
	{"b64 token", "Bearer a-b._~+/c==", "a-b._~+/c==", true},
	{"two spaces", "Bearer  abc", "", false},
	{"tab", "Bearer\tabc", "", false},
	{"trailing space", "Bearer abc ", "", false},
	{"no token", "Bearer ", "", false},
	{"no space", "Bearerabc", "", false},
	{"other scheme", "Basic YWJjOmRlZg==", "", false},
	{"empty", "", "", false},
	{"token with space", "Bearer a b", "", false},
	{"control byte", "Bearer a\x01b", "", false},
	{"non-ASCII", "Bearer abc\xc3\xa9", "", false},
}

func TestBearer(t *testing.T) {
	for _, c := range bearerCases {
		t.Run(c.name, func(t *testing.T) {
			tok, ok := Bearer(c.header)
			if tok != c.tok || ok != c.ok {
				t.Fatalf("Bearer(%q) = %q, %v; want %q, %v", c.header, tok, ok, c.tok, c.ok)
			}
		})
	}
}

func FuzzBearer(f *testing.F) {
	for _, c := range bearerCases {
		f.Add(c.header)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := Bearer(h)
		if !ok {
			if tok != "" {
				t.Fatalf("token %q returned with ok=false", tok)
			}
			return
		}
		if !strings.EqualFold(h[:7], "bearer ") || h[7:] != tok || tok == "" || strings.ContainsAny(tok, " \t\r\n") {
			t.Fatalf("Bearer(%q) = %q accepted a malformed header", h, tok)
		}
	})
}

func TestGate(t *testing.T) {
	g := &Gate{Token: "s3cret"}
	h := g.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("inside")) }))
	do := func(r *http.Request) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		body   string
	}{
		{"no token", func() *http.Request { return httptest.NewRequest("GET", "/metrics", nil) }, 401, "token required"},
		{"browser gets the form", func() *http.Request {
			r := httptest.NewRequest("GET", "/ui/", nil)
			r.Header.Set("Accept", "text/html,application/xhtml+xml")
			return r
		}, 401, `action="/ui/login"`},
		{"bearer", func() *http.Request {
			r := httptest.NewRequest("GET", "/ui/api/incidents", nil)
			r.Header.Set("Authorization", "bearer s3cret")
			return r
		}, 200, "inside"},
		{"wrong bearer", func() *http.Request {
			r := httptest.NewRequest("GET", "/ui/events", nil)
			r.Header.Set("Authorization", "Bearer nope")
			return r
		}, 401, "token required"},
		{"forged cookie", func() *http.Request {
			r := httptest.NewRequest("GET", "/ui/app.js", nil)
			r.AddCookie(&http.Cookie{Name: CookieName, Value: "s3cret"})
			return r
		}, 401, "token required"},
		{"wrong login", func() *http.Request {
			r := httptest.NewRequest("POST", LoginPath, strings.NewReader(url.Values{"token": {"nope"}}.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, 401, "Wrong token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := do(c.req())
			if w.Code != c.status || !strings.Contains(w.Body.String(), c.body) {
				t.Fatalf("got %d %q; want %d containing %q", w.Code, w.Body.String(), c.status, c.body)
			}
		})
	}

	t.Run("login then cookie", func(t *testing.T) {
		r := httptest.NewRequest("POST", LoginPath, strings.NewReader(url.Values{"token": {"s3cret"}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := do(r)
		if w.Code != http.StatusSeeOther {
			t.Fatalf("login: %d %s", w.Code, w.Body)
		}
		cookies := w.Result().Cookies()
		if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || strings.Contains(cookies[0].Value, "s3cret") {
			t.Fatalf("cookie %+v", cookies)
		}
		r = httptest.NewRequest("GET", "/ui/events", nil)
		r.AddCookie(cookies[0])
		if w := do(r); w.Code != 200 {
			t.Fatalf("with cookie: %d", w.Code)
		}
	})
}
