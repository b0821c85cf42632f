package httpapi

import (
	"crypto/tls"
	"net/http"
	"time"
)

const (
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout = 5 * time.Second
	// ReadTimeout bounds reading a whole request on any route, a backstop
	// for bodies nobody reads (the API's own must come within
	// bodyTimeout). It does not bound a handler: a CPU profile may run
	// longer.
	ReadTimeout = 2 * time.Minute
	// IdleTimeout closes a kept-alive connection with no request.
	IdleTimeout = time.Minute
)

// NewServer returns the HTTP server of a node's HTTP port serving h, with
// TLS when tlsConf is not nil. Its timeouts stop a client from holding a
// connection open by sending slowly or not at all; there is no write
// timeout, since a profile answers only when it is done.
func NewServer(h http.Handler, tlsConf *tls.Config) *http.Server {
	return &http.Server{Handler: h, TLSConfig: tlsConf,
		ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout, IdleTimeout: IdleTimeout}
}
