package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/authz"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/tlsconf"
)

// pki is the certificates of a secured cluster: nodes hold a certificate
// of the cluster CA (client port and peer traffic alike), operators and
// services one of the client CA, and an intruder one of a CA nobody
// trusts.
type pki struct {
	dir                        string
	clusterCA, clientCA, other *tlsconf.CA
	caFile, clientCAFile       string
	nodeCert, nodeKey          string
	adminToken, gossipKey      string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	var err error
	check := func(e error) {
		t.Helper()
		if e != nil {
			t.Fatal(e)
		}
	}
	p.clusterCA, err = tlsconf.NewCA("floodgate-cluster")
	check(err)
	p.clientCA, err = tlsconf.NewCA("floodgate-clients")
	check(err)
	p.other, err = tlsconf.NewCA("intruder")
	check(err)
	p.caFile, err = p.clusterCA.WriteCA(p.dir, "ca")
	check(err)
	p.clientCAFile, err = p.clientCA.WriteCA(p.dir, "client-ca")
	check(err)
	p.nodeCert, p.nodeKey, err = p.clusterCA.Issue(p.dir, "node", "127.0.0.1", "localhost")
	check(err)
	p.adminToken = filepath.Join(p.dir, "admin.token")
	check(os.WriteFile(p.adminToken, []byte("admin-e2e-token-0123456789\n"), 0o600))
	p.gossipKey = filepath.Join(p.dir, "gossip.key") // a file, as the README's: out of the process list
	check(os.WriteFile(p.gossipKey, []byte("RD/MfEpCdLGl7JZSd7VYXSVeS5CSpLnrU4Zox8XKsX8=\n"), 0o600))
	return p
}

// args are the flags of every node: TLS and mTLS on the client ports,
// mutual TLS between nodes, encrypted gossip, an admin token and an
// operator certificate name.
func (p *pki) args() []string {
	return []string{
		"--tls-cert", p.nodeCert, "--tls-key", p.nodeKey, "--tls-client-ca", p.clientCAFile,
		"--peer-tls-cert", p.nodeCert, "--peer-tls-key", p.nodeKey, "--peer-tls-ca", p.caFile,
		"--gossip-key-file", p.gossipKey, "--admin-token-file", p.adminToken, "--admin-cert-names", "ops", "--pprof",
	}
}

// client returns TLS for a caller holding a certificate named name from
// ca (nil: no certificate), verifying the nodes with the cluster CA.
func (p *pki) client(t *testing.T, ca *tlsconf.CA, name string) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(p.clusterCA.Cert)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if ca != nil {
		cert, key, err := ca.Issue(p.dir, name)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config, token string) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(authz.Bearer(func() []byte { return []byte(token) }, true)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestSecuredCluster runs three nodes with every port protected and checks
// each refusal a security review asks for, as real callers meet them.
func TestSecuredCluster(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	ops := p.client(t, p.clientCA, "ops")
	c := startSecureCluster(t, 3, []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(ops))}, p.args()...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n1, n2 := c.Nodes[0], c.Nodes[1]
	before, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Nodes) != 3 {
		t.Fatalf("%d nodes formed a cluster over TLS, want 3", len(before.Nodes))
	}

	// A service that may only check limits.
	svc := dialTLS(t, n2.GRPC, p.client(t, p.clientCA, "checkout"), "")
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 5, WindowMs: 60_000}
	if resp, err := pb.NewRateLimiterClient(svc).Allow(ctx, &pb.AllowRequest{Key: "sec-1", Limit: lim}); err != nil || !resp.Allowed {
		t.Fatalf("a service's check: %v, %v", resp, err)
	}
	if _, err := pb.NewAdminClient(svc).Status(ctx, &pb.StatusRequest{}); err != nil {
		t.Fatalf("a service's status (the SDK routes with it): %v", err)
	}
	t.Run("a checking service is denied every change and every Peer call", func(t *testing.T) {
		admin, peer := pb.NewAdminClient(svc), peerv1.NewPeerClient(svc)
		calls := map[string]func() error{
			"Leave":        func() error { _, err := admin.Leave(ctx, &pb.LeaveRequest{NodeId: "n3"}); return err },
			"Join":         func() error { _, err := admin.Join(ctx, &pb.JoinRequest{NodeAddr: "127.0.0.1:1"}); return err },
			"SetPolicies":  func() error { _, err := admin.SetPolicies(ctx, &pb.SetPoliciesRequest{}); return err },
			"DeletePolicy": func() error { _, err := admin.DeletePolicy(ctx, &pb.DeletePolicyRequest{Name: "x"}); return err },
			"ResetKey":     func() error { _, err := admin.ResetKey(ctx, &pb.ResetKeyRequest{Key: "sec-1", Limit: lim}); return err },
			"Peer.ApplyMeta": func() error {
				_, err := peer.ApplyMeta(ctx, &peerv1.ApplyMetaRequest{Command: []byte{1}})
				return err
			},
			"Peer.AddNode": func() error {
				_, err := peer.AddNode(ctx, &peerv1.AddNodeRequest{Node: &metav1.Node{Id: "evil", GrpcAddr: "127.0.0.1:1"}})
				return err
			},
			"Peer.JoinCluster": func() error {
				_, err := peer.JoinCluster(ctx, &peerv1.JoinClusterRequest{Addrs: []string{"127.0.0.1:1"}})
				return err
			},
			"Peer.Forward": func() error { _, err := peer.Forward(ctx, &peerv1.ForwardRequest{}); return err },
			"Peer.ResetKey": func() error {
				_, err := peer.ResetKey(ctx, &peerv1.PeerResetRequest{Key: "sec-1"})
				return err
			},
			"Peer.ExportSlots":   func() error { _, err := peer.ExportSlots(ctx, &peerv1.ExportSlotsRequest{}); return err },
			"Peer.ShardProgress": func() error { _, err := peer.ShardProgress(ctx, &peerv1.ShardProgressRequest{}); return err },
			"Peer.Hello":         func() error { _, err := peer.Hello(ctx, &peerv1.HelloRequest{}); return err },
		}
		for name, call := range calls {
			if code := status.Code(call()); code != codes.PermissionDenied {
				t.Errorf("%s: %s, want PermissionDenied", name, code)
			}
		}
		after, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(after.Nodes) != 3 || after.Epoch != before.Epoch {
			t.Fatalf("refused calls changed the cluster: %d nodes, epoch %d → %d", len(after.Nodes), before.Epoch, after.Epoch)
		}
		resp, err := pb.NewRateLimiterClient(svc).Allow(ctx, &pb.AllowRequest{Key: "sec-1", Limit: lim, Cost: proto.Int64(0)})
		if err != nil || resp.Remaining != 4 {
			t.Fatalf("the refused reset changed the count: %v, %v", resp, err)
		}
	})

	t.Run("operators change the cluster by certificate or by token", func(t *testing.T) {
		set := func(conn *grpc.ClientConn, name string) error {
			_, err := pb.NewAdminClient(conn).SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{{
				Name: name, Limits: []*pb.PolicyLimit{{Name: "per-minute", Limit: &pb.Limit{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 10, WindowMs: 60_000}}},
			}}})
			return err
		}
		if err := set(dialTLS(t, n2.GRPC, ops, ""), "by-cert"); err != nil {
			t.Fatalf("the ops certificate: %v", err)
		}
		if err := set(dialTLS(t, n2.GRPC, p.client(t, p.clientCA, "checkout"), "admin-e2e-token-0123456789"), "by-token"); err != nil {
			t.Fatalf("the admin token: %v", err)
		}
		err := set(dialTLS(t, n2.GRPC, p.client(t, p.clientCA, "checkout"), "not-the-admin-token-at-all"), "by-guess")
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("a wrong token: %v", err)
		}
	})

	t.Run("the client port refuses plaintext, no certificate and an unknown CA", func(t *testing.T) {
		cases := map[string]*grpc.ClientConn{
			"no client certificate": dialTLS(t, n1.GRPC, p.client(t, nil, ""), ""),
			"an intruder CA":        dialTLS(t, n1.GRPC, p.client(t, p.other, "ops"), ""),
		}
		plain, err := grpc.NewClient(n1.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		cases["plaintext"] = plain
		for name, conn := range cases {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := pb.NewRateLimiterClient(conn).Allow(cctx, &pb.AllowRequest{Key: "sec-2", Limit: lim})
			cancel()
			if err == nil {
				t.Errorf("%s: a check was answered", name)
			}
		}
	})

	t.Run("the Raft port speaks only mutual TLS with the cluster CA", func(t *testing.T) {
		// Plaintext, with a well-formed group header and then bytes.
		conn, err := net.DialTimeout("tcp", n1.Raft, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = conn.Write(append([]byte{0xFD, 4}, []byte("meta0123456789")...))
		if _, err := io.ReadAll(conn); err != nil && !isClosed(err) {
			t.Fatalf("plaintext: %v", err)
		}
		conn.Close()
		// TLS with an intruder's certificate.
		for name, cfg := range map[string]*tls.Config{
			"an intruder certificate": p.client(t, p.other, "n9"),
			"no certificate":          p.client(t, nil, ""),
			"a client certificate":    p.client(t, p.clientCA, "ops"),
		} {
			cfg.ServerName = "127.0.0.1"
			tc, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", n1.Raft, cfg)
			if err == nil {
				_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = tc.Write([]byte{0xFD, 4, 'm', 'e', 't', 'a'})
				_, err = tc.Read(make([]byte, 1))
				tc.Close()
			}
			if err == nil || !(strings.Contains(err.Error(), "certificate") || strings.Contains(err.Error(), "EOF") || isClosed(err)) {
				t.Errorf("%s: the Raft port accepted (%v)", name, err)
			}
		}
	})

	t.Run("HTTP is HTTPS, and profiles are for operators", func(t *testing.T) {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: p.client(t, p.clientCA, "checkout")}}
		get := func(path, token string) int {
			t.Helper()
			req, _ := http.NewRequest("GET", "https://"+n1.HTTP+path, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if code := get("/api/v1/limit?key=sec-http&limit=3&window=1m", ""); code != http.StatusOK {
			t.Fatalf("a check over HTTPS: %d", code)
		}
		// The service's certificate is a credential, just not an
		// operator's: 403, not 401.
		if code := get("/debug/pprof/", ""); code != http.StatusForbidden {
			t.Fatalf("profiles with a service's certificate: %d", code)
		}
		if code := get("/debug/pprof/", "admin-e2e-token-0123456789"); code != http.StatusOK {
			t.Fatalf("profiles with the admin token: %d", code)
		}
		// The end of each certificate in use, which only a node with TLS
		// serves (the metrics test's cluster has none).
		resp, err := hc.Get("https://" + n1.HTTP + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, cert := range []string{"tls-cert", "peer-tls-cert"} {
			if !strings.Contains(string(body), `floodgate_tls_certificate_expiration_timestamp_seconds{cert="`+cert+`"}`) {
				t.Errorf("/metrics has no expiry of the %s certificate", cert)
			}
		}
		if resp, err := (&http.Client{Timeout: 3 * time.Second}).Get("http://" + n1.HTTP + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatal("plain HTTP was served")
			}
		}
	})

	t.Run("a rotated certificate is served after SIGHUP, without a restart", func(t *testing.T) {
		cert, key, err := p.clusterCA.Issue(t.TempDir(), "node-rotated", "127.0.0.1", "localhost")
		if err != nil {
			t.Fatal(err)
		}
		for src, dst := range map[string]string{cert: p.nodeCert, key: p.nodeKey} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := n1.Hup(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			served := servedName(t, n1.GRPC, ops)
			if served == "node-rotated" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("n1 still serves %q after SIGHUP", served)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := pb.NewRateLimiterClient(svc).Allow(ctx, &pb.AllowRequest{Key: "sec-3", Limit: lim}); err != nil {
			t.Fatalf("a check after the rotation: %v", err)
		}
	})

	t.Run("floodgatectl leave waits for the node over TLS", func(t *testing.T) {
		// It polls the other members for the node's removal, with the
		// same certificate as its own call.
		cert, key, err := p.clientCA.Issue(p.dir, "ops")
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Ctl(ctx, n1.GRPC, "--cacert", p.caFile, "--cert", cert, "--key", key, "leave", "n3", "--wait", "60s")
		if err != nil || !strings.Contains(out, "node n3 drained and removed") {
			t.Fatalf("leave over TLS: %q %v", out, err)
		}
	})
}

// servedName is the common name of the certificate addr serves.
func servedName(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg.Clone())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	return tc.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func isClosed(err error) bool {
	return err == io.EOF || strings.Contains(err.Error(), "reset by peer") || strings.Contains(err.Error(), "closed")
}

// Tokens alone, without TLS (a cluster on one host's loopback): calls
// without the token are Unauthenticated, a checking caller is not stopped,
// and nodes still form a cluster with the peer token.
func TestTokensWithoutTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin, peer := filepath.Join(dir, "admin"), filepath.Join(dir, "peer")
	for f, tok := range map[string]string{admin: "admin-plain-token-0123456789", peer: "peer-plain-token-0123456789"} {
		if err := os.WriteFile(f, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := startCluster(t, 3, "--admin-token-file", admin, "--peer-token-file", peer)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := c.Nodes[1]
	if _, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: "tok-1", Limit: &pb.Limit{Algorithm: pb.Algorithm_TOKEN_BUCKET, Limit: 3, WindowMs: 1000}}); err != nil {
		t.Fatalf("a check: %v", err)
	}
	if _, err := n.Admin().Leave(ctx, &pb.LeaveRequest{NodeId: "n3"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Leave without a token: %v", err)
	}
	if _, err := peerv1.NewPeerClient(n.Conn()).ApplyMeta(ctx, &peerv1.ApplyMetaRequest{Command: []byte{1}}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ApplyMeta without a token: %v", err)
	}
	withAdmin, err := grpc.NewClient(n.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(authz.Bearer(func() []byte { return []byte("admin-plain-token-0123456789") }, false)))
	if err != nil {
		t.Fatal(err)
	}
	defer withAdmin.Close()
	if _, err := peerv1.NewPeerClient(withAdmin).Hello(ctx, &peerv1.HelloRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a Peer call with the admin token: %v", err)
	}
	if _, err := pb.NewAdminClient(withAdmin).DeletePolicy(ctx, &pb.DeletePolicyRequest{Name: "none"}); status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
		t.Fatalf("DeletePolicy with the admin token: %v", err)
	}
}
