// Package auth checks the bearer token Aegis requires when one is set:
// on the API (the Authorization header, RFC 6750) and on the dashboard
// and metrics (the header, or a session cookie a browser gets from the
// dashboard's login form).
package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"
)

// Bearer returns the token of an Authorization header value that uses the
// Bearer scheme: the scheme name in any case (RFC 7235 section 2.1),
// exactly one space, then a token of visible characters with no spaces.
// It reports false for any other form.
func Bearer(header string) (string, bool) {
	const scheme = "bearer"
	if len(header) < len(scheme)+2 || !strings.EqualFold(header[:len(scheme)], scheme) || header[len(scheme)] != ' ' {
		return "", false
	}
	tok := header[len(scheme)+1:]
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return "", false
		}
	}
	return tok, true
}

// Equal compares a presented token with the configured one in constant
// time (for tokens of the same length).
func Equal(presented, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(presented), []byte(want)) == 1
}

// BearerOK reports whether the Authorization header value carries want.
func BearerOK(header, want string) bool {
	tok, ok := Bearer(header)
	return ok && Equal(tok, want)
}

// sessionValue is the dashboard cookie's value for token: a MAC of a fixed
// label, so the cookie never holds the token itself and changes when the
// token does.
func sessionValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("aegis dashboard session v1"))
	return hex.EncodeToString(m.Sum(nil))
}
