package main

import (
	"crypto/x509"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/tlsconf"
)

// nodeCertFixture is a node secured as the README's Security section
// says, with its client and peer certificates in files of their own so
// each can be rotated alone.
type nodeCertFixture struct {
	dir                          string
	cluster, foreign             *tlsconf.CA
	cert, key, peerCert, peerKey string
	caFile                       string
}

func newNodeCertFixture(t *testing.T) *nodeCertFixture {
	t.Helper()
	f := &nodeCertFixture{dir: t.TempDir()}
	var err error
	if f.cluster, err = tlsconf.NewCA("cluster"); err != nil {
		t.Fatal(err)
	}
	if f.foreign, err = tlsconf.NewCA("foreign"); err != nil {
		t.Fatal(err)
	}
	if f.caFile, err = f.cluster.WriteCA(f.dir, "ca"); err != nil {
		t.Fatal(err)
	}
	if f.cert, f.key, err = f.cluster.Issue(f.dir, "node", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if f.peerCert, f.peerKey, err = f.cluster.Issue(f.dir, "node-peer", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	return f
}

// security starts the node's security from the fixture's files.
func (f *nodeCertFixture) security(t *testing.T) *security {
	t.Helper()
	o, err := parseOptions(f.args(), noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSecurity(o.security)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *nodeCertFixture) args() []string {
	return []string{"--tls-cert", f.cert, "--tls-key", f.key,
		"--peer-tls-cert", f.peerCert, "--peer-tls-key", f.peerKey, "--peer-tls-ca", f.caFile}
}

// rewrite issues a certificate of ca for name and writes it and its key
// over cert and key, as a rotation on disk does.
func rewrite(t *testing.T, ca *tlsconf.CA, name, cert, key string) {
	t.Helper()
	c, k, err := ca.Issue(t.TempDir(), name, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{c: cert, k: key} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A --peer-tls-cert the peer CA does not verify stops the node at start,
// naming the flag: it used to start and retry its join forever on
// "tls: bad certificate".
func TestForeignPeerCertRefusedAtStart(t *testing.T) {
	f := newNodeCertFixture(t)
	rewrite(t, f.foreign, "stranger", f.peerCert, f.peerKey)
	o, err := parseOptions(f.args(), noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newSecurity(o.security); err == nil || !strings.HasPrefix(err.Error(), "peer-tls-cert: other nodes could not verify it") {
		t.Fatalf("a peer certificate of a foreign CA: %v", err)
	}
}

// A rotation on disk to a certificate the other nodes could not verify is
// refused, naming the flag, and the previous certificate stays in use: it
// used to be served at once, failing every Raft and Peer connection to
// the node.
func TestReloadRefusesCertsOtherNodesCannotVerify(t *testing.T) {
	f := newNodeCertFixture(t)
	s := f.security(t)

	rewrite(t, f.foreign, "stranger", f.cert, f.key)
	if err := s.reload(); err == nil || !strings.Contains(err.Error(), "tls-cert: other nodes could not verify it") {
		t.Fatalf("reload of a foreign client-port certificate: %v", err)
	}
	if got := s.client.Leaf().Subject.CommonName; got != "node" {
		t.Fatalf("the client port serves %q after a refused reload", got)
	}
	rewrite(t, f.cluster, "node-2", f.cert, f.key)

	rewrite(t, f.foreign, "stranger", f.peerCert, f.peerKey)
	if err := s.reload(); err == nil || !strings.Contains(err.Error(), "peer-tls-cert: other nodes could not verify it") {
		t.Fatalf("reload of a foreign peer certificate: %v", err)
	}
	if got := s.peer.Leaf().Subject.CommonName; got != "node-peer" {
		t.Fatalf("the node presents %q to others after a refused reload", got)
	}
	if got := s.client.Leaf().Subject.CommonName; got != "node-2" {
		t.Fatalf("a good client-port certificate was not taken: %q", got)
	}

	// A peer CA that no longer signs the node's own certificates.
	if _, err := f.foreign.WriteCA(f.dir, "ca"); err != nil {
		t.Fatal(err)
	}
	rewrite(t, f.cluster, "node-peer-2", f.peerCert, f.peerKey)
	if err := s.reload(); err == nil || !strings.Contains(err.Error(), "other nodes could not verify it with --peer-tls-ca") {
		t.Fatalf("reload of a peer CA that signs neither certificate: %v", err)
	}
	if !s.peer.Pool().Equal(poolOf(f.cluster)) {
		t.Fatal("the refused peer CA is in use")
	}
}

// A rotation to a new CA that rewrites the CA and both certificates at
// once is taken, whichever file the reload reads first.
func TestReloadTakesANewCAWithItsCerts(t *testing.T) {
	f := newNodeCertFixture(t)
	s := f.security(t)
	next, err := tlsconf.NewCA("cluster-next")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.WriteCA(f.dir, "ca"); err != nil {
		t.Fatal(err)
	}
	rewrite(t, next, "node-next", f.cert, f.key)
	rewrite(t, next, "node-peer-next", f.peerCert, f.peerKey)
	if err := s.reload(); err != nil {
		t.Fatalf("reload of a new CA with its certificates: %v", err)
	}
	if s.client.Leaf().Subject.CommonName != "node-next" || s.peer.Leaf().Subject.CommonName != "node-peer-next" || !s.peer.Pool().Equal(poolOf(next)) {
		t.Fatal("the new CA and certificates are not all in use")
	}
}

// poolOf is the pool of ca alone.
func poolOf(ca *tlsconf.CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// A certificate without the host other nodes dial it at stops the node at
// start, naming the flag, and is refused by a reload: it used to start a
// node that joined and then waited forever, every node's call to it
// failing the host name check.
func TestCertsMustNameTheAdvertisedHost(t *testing.T) {
	f := newNodeCertFixture(t)
	for _, files := range [][2]string{{f.cert, f.key}, {f.peerCert, f.peerKey}} {
		c, k, err := f.cluster.Issue(t.TempDir(), "elsewhere", "other.example")
		if err != nil {
			t.Fatal(err)
		}
		args := f.args()
		for i, a := range args {
			switch a {
			case files[0]:
				args[i] = c
			case files[1]:
				args[i] = k
			}
		}
		o, err := parseOptions(append(args, "--advertise-host", "127.0.0.1"), noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		want := "tls-cert: other nodes dial this node at 127.0.0.1 (--grpc-addr"
		if files[0] == f.peerCert {
			want = "peer-tls-cert: other nodes dial this node at 127.0.0.1 (--raft-addr"
		}
		if _, err := newSecurity(o.security); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("a certificate for other.example: %v, want %q", err, want)
		}
	}

	s := f.security(t)
	c, k, err := f.cluster.Issue(t.TempDir(), "elsewhere", "other.example")
	if err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{c: f.cert, k: f.key} {
		b, _ := os.ReadFile(src)
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.reload(); err == nil || !strings.Contains(err.Error(), "tls-cert: other nodes dial this node at 127.0.0.1") {
		t.Fatalf("reload of a certificate for another host: %v", err)
	}
	if got := s.client.Leaf().Subject.CommonName; got != "node" {
		t.Fatalf("the client port serves %q after a refused reload", got)
	}
}
