package authz

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/tlsconf"
)

func TestRoleOf(t *testing.T) {
	for method, want := range map[string]Role{
		"/floodgate.v1.RateLimiter/Allow":                              Check,
		"/floodgate.v1.RateLimiter/AllowBatch":                         Check,
		"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit": Check,
		"/grpc.health.v1.Health/Check":                                 Check,
		"/floodgate.v1.Admin/Status":                                   Check,
		"/floodgate.v1.Admin/GetPolicy":                                Check,
		"/floodgate.v1.Admin/ListPolicies":                             Check,
		"/floodgate.v1.Admin/ValidatePolicies":                         Check,
		"/floodgate.v1.Admin/Join":                                     Admin,
		"/floodgate.v1.Admin/Leave":                                    Admin,
		"/floodgate.v1.Admin/SetPolicies":                              Admin,
		"/floodgate.v1.Admin/DeletePolicy":                             Admin,
		"/floodgate.v1.Admin/ResetKey":                                 Admin,
		"/floodgate.v1.Admin/SomethingNew":                             Admin, // new Admin methods are closed by default
		"/floodgate.peer.v1.Peer/Forward":                              Peer,
		"/floodgate.peer.v1.Peer/ApplyMeta":                            Peer,
		"/floodgate.peer.v1.Peer/AddNode":                              Peer,
		"/floodgate.peer.v1.Peer/JoinCluster":                          Peer,
	} {
		if got := RoleOf(method); got != want {
			t.Errorf("RoleOf(%s) = %s, want %s", method, got, want)
		}
	}
}

// creds are the certificates of one test: a peer CA with a node's
// certificate, a client CA with an operator's and a service's, and a
// stranger's CA.
type creds struct {
	peerCA, clientCA           *x509.CertPool
	node, operator, svc, other *tls.ConnectionState
}

func newCreds(t *testing.T) creds {
	t.Helper()
	dir := t.TempDir()
	state := func(ca *tlsconf.CA, name string) *tls.ConnectionState {
		cert, key, err := ca.Issue(dir, name, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}
	}
	pool := func(ca *tlsconf.CA) *x509.CertPool {
		p := x509.NewCertPool()
		p.AddCert(ca.Cert)
		return p
	}
	peerCA, clientCA, otherCA := mustCA(t, "peers"), mustCA(t, "clients"), mustCA(t, "stranger")
	return creds{
		peerCA: pool(peerCA), clientCA: pool(clientCA),
		node: state(peerCA, "n1"), operator: state(clientCA, "ops"), svc: state(clientCA, "checkout"),
		other: state(otherCA, "ops"),
	}
}

func mustCA(t *testing.T, name string) *tlsconf.CA {
	ca, err := tlsconf.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func static(b string) func() [][]byte { return func() [][]byte { return [][]byte{[]byte(b)} } }

const adminTok, peerTok = "admin-token-0123456789", "peer-token-0123456789"

func TestCheck(t *testing.T) {
	c := newCreds(t)
	rules := &Rules{
		AdminToken: static(adminTok), PeerToken: static(peerTok),
		PeerCAs: func() *x509.CertPool { return c.peerCA }, ClientCAs: func() *x509.CertPool { return c.clientCA },
		AdminNames: []string{"ops"},
	}
	const ok, unauth, denied = "ok", "unauthenticated", "denied"
	for _, tc := range []struct {
		name  string
		role  Role
		token string
		tls   *tls.ConnectionState
		want  string
	}{
		{"anyone checks", Check, "", nil, ok},
		{"a service checks", Check, "", c.svc, ok},
		{"no credential, admin call", Admin, "", nil, unauth},
		{"no credential, peer call", Peer, "", nil, unauth},
		{"TLS without a client certificate, admin call", Admin, "", &tls.ConnectionState{}, unauth},
		{"admin token", Admin, adminTok, nil, ok},
		{"wrong token", Admin, "admin-token-012345678X", nil, denied},
		{"a prefix of the admin token", Admin, adminTok[:10], nil, denied},
		{"peer token is not admin", Admin, peerTok, nil, denied},
		{"admin token is not peer", Peer, adminTok, nil, denied},
		{"peer token", Peer, peerTok, nil, ok},
		{"operator certificate", Admin, "", c.operator, ok},
		{"service certificate, not named admin", Admin, "", c.svc, denied},
		{"the operator's name from a stranger CA", Admin, "", c.other, denied},
		{"node certificate is not admin", Admin, "", c.node, denied},
		{"node certificate", Peer, "", c.node, ok},
		{"operator certificate is not peer", Peer, "", c.operator, denied},
		{"a stranger's certificate is not peer", Peer, "", c.other, denied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := rules.Check(tc.role, tc.token, tc.tls)
			got := ok
			switch {
			case errors.Is(err, ErrUnauthenticated):
				got = unauth
			case errors.Is(err, ErrDenied):
				got = denied
			case err != nil:
				t.Fatalf("unclassified error %v", err)
			}
			if got != tc.want {
				t.Fatalf("got %s (%v), want %s", got, err, tc.want)
			}
		})
	}
}

// With no credential configured (a development node), every call passes.
// Each role is closed once a credential for it is configured: peer TLS
// alone closes the Peer service and leaves Admin as it was (the daemon
// warns, and refuses the reverse: Admin closed with Peer open).
func TestEnforced(t *testing.T) {
	var open *Rules
	if open.Enforced() || (&Rules{}).Enforced() {
		t.Fatal("no credentials, yet enforced")
	}
	if err := (&Rules{}).Check(Peer, "", nil); err != nil {
		t.Fatalf("open rules refused a peer call: %v", err)
	}
	adminOnly := &Rules{AdminToken: static(adminTok)}
	if !adminOnly.AdminEnforced() || adminOnly.PeerEnforced() {
		t.Fatal("an admin token closes Admin only")
	}
	if err := adminOnly.Check(Admin, "", nil); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("admin token configured: an Admin call without it got %v", err)
	}
	peerOnly := &Rules{PeerToken: static(peerTok)}
	if err := peerOnly.Check(Admin, "", nil); err != nil {
		t.Fatalf("only peer credentials: an Admin call got %v", err)
	}
	if err := peerOnly.Check(Peer, "", nil); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("peer token configured: a Peer call without it got %v", err)
	}
}

// The token a rule reads is the current one: a reload applies to the next
// call.
func TestTokenReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(adminTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadToken("admin-token-file", file)
	if err != nil {
		t.Fatal(err)
	}
	rules := &Rules{AdminToken: tok.Values}
	if err := rules.Check(Admin, adminTok, nil); err != nil {
		t.Fatalf("trailing newline not trimmed: %v", err)
	}
	const next = "rotated-token-9876543210"
	if err := os.WriteFile(file, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tok.Reload(); err != nil {
		t.Fatal(err)
	}
	if rules.Check(Admin, adminTok, nil) == nil || rules.Check(Admin, next, nil) != nil {
		t.Fatal("the rotated token is not the one checked")
	}
	if err := os.WriteFile(file, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tok.Reload(); err == nil || !strings.Contains(err.Error(), "admin-token-file") {
		t.Fatalf("a short token reloaded: %v", err)
	}
	if rules.Check(Admin, next, nil) != nil {
		t.Fatal("a failed reload dropped the previous token")
	}
}

func TestLoadTokenNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, file := range map[string]string{
		"missing":      filepath.Join(dir, "nope"),
		"empty":        write("empty", "\n"),
		"short":        write("short", "abc"),
		"inner spaces": write("spaces", "abcdefgh ijklmnopq"),
	} {
		if _, err := LoadToken("peer-token-file", file); err == nil || !strings.Contains(err.Error(), "peer-token-file: ") {
			t.Errorf("%s: got %v, want an error naming peer-token-file", name, err)
		}
	}
}

// The interceptors map refusals to Unauthenticated and PermissionDenied
// and read the bearer token and the TLS state from the call.
func TestInterceptors(t *testing.T) {
	c := newCreds(t)
	rules := &Rules{AdminToken: static(adminTok), PeerCAs: func() *x509.CertPool { return c.peerCA }}
	handler := func(context.Context, any) (any, error) { return "done", nil }
	call := func(method, token string, st *tls.ConnectionState) codes.Code {
		ctx := context.Background()
		if token != "" {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+token))
		}
		if st != nil {
			ctx = peer.NewContext(ctx, &peer.Peer{AuthInfo: credentials.TLSInfo{State: *st}})
		}
		_, err := rules.UnaryInterceptor()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, handler)
		return status.Code(err)
	}
	for _, tc := range []struct {
		method, token string
		st            *tls.ConnectionState
		want          codes.Code
	}{
		{"/floodgate.v1.RateLimiter/Allow", "", nil, codes.OK},
		{"/floodgate.v1.Admin/Leave", "", nil, codes.Unauthenticated},
		{"/floodgate.v1.Admin/Leave", "nope-nope-nope-nope", nil, codes.PermissionDenied},
		{"/floodgate.v1.Admin/Leave", adminTok, nil, codes.OK},
		{"/floodgate.peer.v1.Peer/ApplyMeta", adminTok, nil, codes.PermissionDenied},
		{"/floodgate.peer.v1.Peer/ApplyMeta", "", c.node, codes.OK},
		{"/floodgate.peer.v1.Peer/ApplyMeta", "", c.svc, codes.PermissionDenied},
	} {
		if got := call(tc.method, tc.token, tc.st); got != tc.want {
			t.Errorf("%s with token %q: %s, want %s", tc.method, tc.token, got, tc.want)
		}
	}
}

func TestHTTP(t *testing.T) {
	rules := &Rules{AdminToken: static(adminTok), PeerToken: static(peerTok)}
	h := rules.HTTP(Admin, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for token, want := range map[string]int{"": 401, peerTok: 403, adminTok: http.StatusTeapot} {
		req := httptest.NewRequest("GET", "/debug/pprof/", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("token %q: %d, want %d", token, rec.Code, want)
		}
	}
}

func TestBearer(t *testing.T) {
	md, err := Bearer(func() []byte { return []byte(peerTok) }, true).GetRequestMetadata(context.Background())
	if err != nil || md["authorization"] != "Bearer "+peerTok {
		t.Fatalf("got %v, %v", md, err)
	}
	if !Bearer(func() []byte { return []byte(peerTok) }, true).RequireTransportSecurity() || Bearer(func() []byte { return []byte(peerTok) }, false).RequireTransportSecurity() {
		t.Fatal("RequireTransportSecurity does not follow requireTLS")
	}
}

// A token its check refuses is not taken on reload: the previous stays.
func TestTokenReloadCheck(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(adminTok), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadToken("admin-token-file", file)
	if err != nil {
		t.Fatal(err)
	}
	const taken = "the-other-roles-token-0123"
	tok.SetCheck(func(v [][]byte) error {
		if string(v[0]) == taken {
			return errors.New("admin-token-file: taken")
		}
		return nil
	})
	if err := os.WriteFile(file, []byte(taken), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tok.Reload(); err == nil || !strings.Contains(err.Error(), "taken") {
		t.Fatalf("a refused token reloaded: %v", err)
	}
	if string(tok.Value()) != adminTok {
		t.Fatalf("a refused reload changed the token to %q", tok.Value())
	}
}

// A token shared by nodes is rotated one node at a time with no refused
// call: the file holds several tokens, the first sent and every one
// accepted. With one token a file, the nodes reloaded first and those not
// yet reloaded refused each other's Peer calls (checks forwarded to a
// leader failed) until the last one was reloaded.
func TestSharedTokenRollingRotation(t *testing.T) {
	dir := t.TempDir()
	const old, next = "peer-token-old-0123456789", "peer-token-new-0123456789"
	files := []string{filepath.Join(dir, "n1"), filepath.Join(dir, "n2")}
	var toks []*Token
	for _, f := range files {
		if err := os.WriteFile(f, []byte(old+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		tok, err := LoadToken("peer-token-file", f)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	// Every node's call is accepted by every other node.
	allAccepted := func(step string) {
		t.Helper()
		for i, from := range toks {
			for j, to := range toks {
				rules := &Rules{PeerToken: to.Values}
				if err := rules.Check(Peer, string(from.Value()), nil); err != nil {
					t.Fatalf("%s: n%d's call to n%d: %v", step, i+1, j+1, err)
				}
			}
		}
	}
	for _, step := range []struct{ name, body string }{
		{"the new token added", old + "\n" + next + "\n"},
		{"the new token sent", next + "\r\n" + old + "\r\n"},
		{"the old token dropped", next + "\n"},
	} {
		// One node after the other, checking between the two.
		for _, i := range []int{0, 1} {
			if err := os.WriteFile(files[i], []byte(step.body), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := toks[i].Reload(); err != nil {
				t.Fatalf("%s on n%d: %v", step.name, i+1, err)
			}
			allAccepted(step.name)
		}
	}
	if (&Rules{PeerToken: toks[0].Values}).Check(Peer, old, nil) == nil {
		t.Fatal("the dropped token is still accepted")
	}
	// Each line is a token, checked as one.
	if err := os.WriteFile(files[0], []byte(next+"\nshort\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := toks[0].Reload(); err == nil || !strings.Contains(err.Error(), "peer-token-file: the token on line 2") {
		t.Fatalf("a short second token: %v", err)
	}
}
