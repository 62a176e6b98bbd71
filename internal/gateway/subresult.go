package gateway

import (
	"bytes"
	"net/http"
)

// subResult is what one choice's exchange ended with.
type subResult struct {
	ended  ending
	status int
	header http.Header
	body   bytes.Buffer
}

func (s *subResult) Header() http.Header { return s.header }
func (s *subResult) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.body.Write(p)
}
func (s *subResult) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}
