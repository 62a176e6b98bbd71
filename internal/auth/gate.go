package auth

import (
	"html"
	"net/http"
	"strings"
	"time"
)

// CookieName is the dashboard's session cookie.
const CookieName = "aegis_session"

// LoginPath is where the dashboard's login form posts the token.
const LoginPath = "/ui/login"

// Gate requires the token on the pages and data it protects. A request
// passes with "Authorization: Bearer TOKEN" (scrapers, scripts) or with
// the session cookie set by the login form (browsers). An empty Token
// lets everything through.
type Gate struct {
	Token string
	// SessionMaxAge is the cookie's lifetime; zero means 12 hours.
	SessionMaxAge time.Duration
}

// Allowed reports whether r carries the token or a valid session cookie.
func (g *Gate) Allowed(r *http.Request) bool {
	if g.Token == "" {
		return true
	}
	if BearerOK(r.Header.Get("Authorization"), g.Token) {
		return true
	}
	c, err := r.Cookie(CookieName)
	return err == nil && Equal(c.Value, sessionValue(g.Token))
}

// Protect wraps h: requests without the token get 401 (with a login form
// when they come from a browser page), the login form's POST sets the
// session cookie.
func (g *Gate) Protect(h http.Handler) http.Handler {
	if g.Token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == LoginPath {
			g.login(w, r)
			return
		}
		if g.Allowed(r) {
			h.ServeHTTP(w, r)
			return
		}
		g.deny(w, r, "")
	})
}

func (g *Gate) deny(w http.ResponseWriter, r *http.Request, note string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="aegis"`)
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/ui") && strings.Contains(r.Header.Get("Accept"), "text/html") {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; frame-ancestors 'none'")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(loginPage(note)))
		return
	}
	http.Error(w, "token required: send Authorization: Bearer TOKEN, or sign in at "+LoginPath, http.StatusUnauthorized)
}

// login checks the token posted by the form and sets the session cookie.
func (g *Gate) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		g.deny(w, r, "")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil || !Equal(r.PostForm.Get("token"), g.Token) {
		r.Header.Set("Accept", "text/html")
		r.Method = http.MethodGet
		r.URL.Path = "/ui/"
		g.deny(w, r, "Wrong token.")
		return
	}
	age := g.SessionMaxAge
	if age == 0 {
		age = 12 * time.Hour
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: sessionValue(g.Token), Path: "/", MaxAge: int(age.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func loginPage(note string) string {
	msg := ""
	if note != "" {
		msg = "<p><strong>" + html.EscapeString(note) + "</strong></p>"
	}
	return `<!doctype html><html><head><meta charset="utf-8"><title>Aegis: sign in</title></head><body>
<h1>Aegis dashboard</h1>` + msg + `
<p>This server requires its bearer token.</p>
<form method="post" action="` + LoginPath + `"><label>Token <input type="password" name="token" autocomplete="current-password" autofocus></label>
<button type="submit">Sign in</button></form></body></html>
`
}
