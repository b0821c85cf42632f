package authz

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Role is what a call needs its caller to be.
type Role int

// The roles, from least to most trusted for the cluster's state.
const (
	// Check may check limits and read the cluster's status and policies.
	Check Role = iota
	// Admin may also change membership, policies and counts.
	Admin
	// Peer is another node: it may call the Peer service.
	Peer
)

func (r Role) String() string {
	switch r {
	case Admin:
		return "admin"
	case Peer:
		return "peer"
	}
	return "check"
}

// Service names whose methods need more than Check.
const (
	adminService = "/floodgate.v1.Admin/"
	peerService  = "/floodgate.peer.v1.Peer/"
)

// readOnlyAdmin are the Admin methods a checking client may call: the SDK
// discovers nodes with Status and learns policies with ListPolicies.
// ValidatePolicies writes nothing and tells no more than ListPolicies, and
// `policy apply --dry-run` (a CI job's, often) needed no more before it.
var readOnlyAdmin = []string{"Status", "GetPolicy", "ListPolicies", "ValidatePolicies"}

// RoleOf returns the role a gRPC method (its full name) needs. Methods of
// unknown services need Check: they are the public ones (RateLimiter,
// Envoy RLS, health, reflection).
func RoleOf(fullMethod string) Role {
	switch {
	case strings.HasPrefix(fullMethod, peerService):
		return Peer
	case strings.HasPrefix(fullMethod, adminService):
		if slices.Contains(readOnlyAdmin, strings.TrimPrefix(fullMethod, adminService)) {
			return Check
		}
		return Admin
	}
	return Check
}

// Rules are a node's credentials. The token and pool functions return
// the current value, so a reload (SIGHUP) applies to the next call; each
// may be nil.
type Rules struct {
	// AdminToken returns the bearer tokens of operators (any one is
	// accepted: more than one while a token is rotated).
	AdminToken func() [][]byte
	// PeerToken returns the bearer tokens all nodes share.
	PeerToken func() [][]byte
	// PeerCAs verifies the client certificates of nodes.
	PeerCAs func() *x509.CertPool
	// ClientCAs verifies client certificates of callers on the client
	// port; a certificate it verifies, named in AdminNames (common name or
	// a DNS or URI name), makes its caller an operator.
	ClientCAs  func() *x509.CertPool
	AdminNames []string
}

// Enforced reports whether any call is checked.
func (r *Rules) Enforced() bool { return r.AdminEnforced() || r.PeerEnforced() }

// AdminEnforced reports whether Admin calls that change the cluster need
// an operator's credential: once one is configured.
func (r *Rules) AdminEnforced() bool {
	return r != nil && (r.AdminToken != nil || len(r.AdminNames) > 0)
}

// PeerEnforced reports whether Peer calls need a node's credential: once
// one is configured.
func (r *Rules) PeerEnforced() bool { return r != nil && (r.PeerToken != nil || r.PeerCAs != nil) }

// Check returns the role's refusal for a caller with bearer token token
// (empty when none) and TLS state tlsState (nil on a plaintext
// connection), or nil when it may make the call.
func (r *Rules) Check(role Role, token string, tlsState *tls.ConnectionState) error {
	if role == Check || role == Admin && !r.AdminEnforced() || role == Peer && !r.PeerEnforced() {
		return nil
	}
	switch role {
	case Admin:
		if r.AdminToken != nil && token != "" && equal(token, r.AdminToken()) {
			return nil
		}
		if names, ok := verified(tlsState, r.ClientCAs); ok && intersects(names, r.AdminNames) {
			return nil
		}
	case Peer:
		// Nodes never call each other's Admin service, and operators
		// never need the Peer service: neither credential stands in for
		// the other.
		if r.PeerToken != nil && token != "" && equal(token, r.PeerToken()) {
			return nil
		}
		if _, ok := verified(tlsState, r.PeerCAs); ok {
			return nil
		}
	}
	if token == "" && (tlsState == nil || len(tlsState.PeerCertificates) == 0) {
		return fmt.Errorf("%w: this call needs the %s role: send a bearer token or a client certificate", ErrUnauthenticated, role)
	}
	return fmt.Errorf("%w: the caller's credentials do not grant the %s role", ErrDenied, role)
}

// ErrUnauthenticated means the caller sent no credential; ErrDenied that
// the one it sent does not allow the call.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrDenied          = errors.New("permission denied")
)

// equal reports whether token is one of want, comparing each in constant
// time.
func equal(token string, want [][]byte) bool {
	found := false
	for _, w := range want {
		if len(w) > 0 && subtle.ConstantTimeCompare([]byte(token), w) == 1 {
			found = true
		}
	}
	return found
}

func intersects(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// verified returns the names of the TLS client certificate when pool
// verifies it.
func verified(st *tls.ConnectionState, pool func() *x509.CertPool) ([]string, bool) {
	if st == nil || pool == nil {
		return nil, false
	}
	return Names(st.PeerCertificates, pool())
}

// Names verifies a presented chain (leaf first) for client authentication
// against pool and returns the leaf's names: common name, DNS and URI SANs.
func Names(chain []*x509.Certificate, pool *x509.CertPool) ([]string, bool) {
	if len(chain) == 0 || pool == nil {
		return nil, false
	}
	leaf := chain[0]
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, false
	}
	names := append([]string{leaf.Subject.CommonName}, leaf.DNSNames...)
	for _, u := range leaf.URIs {
		names = append(names, u.String())
	}
	return names, true
}

// bearerToken returns the token of an authorization value "Bearer
// <token>". The scheme's case does not matter (RFC 9110): a client or
// proxy that writes "bearer" sent its token all the same, and used to be
// told it sent none.
func bearerToken(v string) (string, bool) {
	const scheme = "bearer "
	if len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return "", false
	}
	return strings.TrimSpace(v[len(scheme):]), true
}

// fromContext returns the bearer token and TLS state of a gRPC call.
func fromContext(ctx context.Context) (string, *tls.ConnectionState) {
	var token string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, v := range md.Get("authorization") {
			if t, ok := bearerToken(v); ok {
				token = t
			}
		}
	}
	var st *tls.ConnectionState
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			st = &info.State
		}
	}
	return token, st
}

// authorize checks a gRPC call and maps a refusal to its status code.
func (r *Rules) authorize(ctx context.Context, fullMethod string) error {
	token, st := fromContext(ctx)
	err := r.Check(RoleOf(fullMethod), token, st)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnauthenticated):
		return status.Errorf(codes.Unauthenticated, "%s: %v", fullMethod, err)
	}
	return status.Errorf(codes.PermissionDenied, "%s: %v", fullMethod, err)
}

// UnaryInterceptor refuses unary calls whose caller lacks the role.
func (r *Rules) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := r.authorize(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

// StreamInterceptor refuses streams whose caller lacks the role.
func (r *Rules) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := r.authorize(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return h(srv, ss)
	}
}

// HTTP refuses requests whose caller lacks role, with 401 or 403, for
// endpoints of the HTTP port that need more than Check (profiles).
func (r *Rules) HTTP(role Role, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, _ := bearerToken(req.Header.Get("Authorization"))
		switch err := r.Check(role, token, req.TLS); {
		case err == nil:
			h.ServeHTTP(w, req)
		case errors.Is(err, ErrUnauthenticated):
			w.Header().Set("WWW-Authenticate", `Bearer realm="floodgate"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
		default:
			http.Error(w, err.Error(), http.StatusForbidden)
		}
	})
}
