package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/tlsconf"
)

// Security settings that cannot work, or would leave a door open, are
// refused before the node starts, naming the setting.
func TestSecurityFlagsNameTheSetting(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsconf.NewCA("cluster")
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlsconf.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _ := ca.WriteCA(dir, "ca")
	cert, key, err := ca.Issue(dir, "node", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	otherCert, otherKey, err := other.Issue(dir, "foreign", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("a-token-of-enough-length"), 0o600); err != nil {
		t.Fatal(err)
	}
	sameToken := filepath.Join(dir, "same-token") // another file, the same token
	if err := os.WriteFile(sameToken, []byte("a-token-of-enough-length\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Another file whose second token (one being rotated) is the same.
	rotating := filepath.Join(dir, "rotating-token")
	if err := os.WriteFile(rotating, []byte("another-token-of-enough-length\na-token-of-enough-length\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	peer := []string{"--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", caFile}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-key", key}, "tls-cert: "},
		{[]string{"--tls-cert", cert}, "tls-key: "},
		{[]string{"--tls-client-ca", caFile}, "tls-cert: "},
		{[]string{"--tls-cert", filepath.Join(dir, "missing"), "--tls-key", key}, "tls-cert: "},
		{[]string{"--tls-cert", cert, "--tls-key", otherKey}, "tls-key: not the key of the certificate in --tls-cert"},
		{[]string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", key}, "tls-client-ca: "},
		{[]string{"--peer-tls-cert", cert, "--peer-tls-key", key}, "peer-tls-cert: "},
		{peer, "peer-tls-cert: Peer calls share the client gRPC port"},
		{append([]string{"--tls-cert", cert, "--tls-key", key, "--peer-tls-ca", short}, peer[:4]...), "peer-tls-ca: "},
		{[]string{"--gossip-key", "not base64!"}, "gossip-key: "},
		{[]string{"--gossip-key", "c2hvcnQ="}, "gossip-key: 5 bytes"},
		{[]string{"--admin-token-file", token}, "admin-token-file: the Peer service"},
		{[]string{"--admin-token-file", short, "--peer-token-file", token}, "admin-token-file: "},
		{[]string{"--peer-token-file", filepath.Join(dir, "missing")}, "peer-token-file: "},
		{[]string{"--admin-cert-names", "ops"}, "admin-cert-names: needs --tls-client-ca"},
		// Other nodes would have no certificate for the client port.
		{[]string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", caFile, "--peer-token-file", token}, "tls-client-ca: the client port then requires a certificate of every caller"},
		{[]string{"--admin-token-file", token, "--peer-token-file", token}, "peer-token-file: holds the same token as --admin-token-file"},
		{[]string{"--admin-token-file", token, "--peer-token-file", sameToken}, "peer-token-file: holds the same token as --admin-token-file"},
		{[]string{"--admin-token-file", rotating, "--peer-token-file", sameToken}, "peer-token-file: holds the same token as --admin-token-file"},
	} {
		_, err := parseOptions(tc.args, noEnv, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}

	// A client-port certificate that other nodes could not verify with
	// the peer CA is refused when the node starts.
	o, err := parseOptions(append([]string{"--tls-cert", otherCert, "--tls-key", otherKey}, peer...), noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newSecurity(o.security); err == nil || !strings.Contains(err.Error(), "tls-cert: other nodes could not verify it") {
		t.Fatalf("a foreign client-port certificate: %v", err)
	}
	// A client CA the peer CA trusts would make every client a node: the
	// cluster's own CA as the client CA, or a bundle that holds it.
	otherFile, _ := other.WriteCA(dir, "other")
	bundle := filepath.Join(dir, "bundle.crt")
	a, _ := os.ReadFile(otherFile)
	b, _ := os.ReadFile(caFile)
	if err := os.WriteFile(bundle, append(a, b...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, clientCA := range []string{caFile, bundle} {
		o, err := parseOptions(append([]string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", clientCA}, peer...), noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newSecurity(o.security); err == nil || !strings.Contains(err.Error(), "tls-client-ca: --peer-tls-ca trusts its CA CN=cluster too") {
			t.Errorf("client CA %s: %v", clientCA, err)
		}
	}
	// A client CA of its own is fine.
	o, err = parseOptions(append([]string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", otherFile}, peer...), noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newSecurity(o.security); err != nil {
		t.Errorf("a client CA of its own: %v", err)
	}
	// Without a peer CA, a private certificate would fail every Peer call.
	o, err = parseOptions([]string{"--tls-cert", cert, "--tls-key", key}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newSecurity(o.security); err == nil || !strings.Contains(err.Error(), "tls-cert: other nodes verify it with the system's roots") {
		t.Fatalf("a private client-port certificate without a peer CA: %v", err)
	}
	o, err = parseOptions(append([]string{"--tls-cert", cert, "--tls-key", key, "--gossip-key", "RD/MfEpCdLGl7JZSd7VYXSVeS5CSpLnrU4Zox8XKsX8="}, peer...), noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := newSecurity(o.security)
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.gossipKeys) != 1 || sec.raftTLS() == nil || !sec.rules.Enforced() || sec.clientPortTLS() == nil {
		t.Fatalf("security built from good flags: %+v", sec)
	}
}

// The rules checked at start hold across a reload: a client CA file
// rotated to one the peer CA trusts, or a token file rotated to the other
// role's token, is refused and the previous one stays in use.
func TestReloadKeepsRolesApart(t *testing.T) {
	dir := t.TempDir()
	ca, _ := tlsconf.NewCA("cluster")
	clients, _ := tlsconf.NewCA("clients")
	caFile, _ := ca.WriteCA(dir, "ca")
	clientCA, _ := clients.WriteCA(dir, "client-ca")
	cert, key, err := ca.Issue(dir, "node", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	adminTok, peerTok := filepath.Join(dir, "admin.token"), filepath.Join(dir, "peer.token")
	for file, tok := range map[string]string{adminTok: "admin-token-0123456789", peerTok: "peer-token-0123456789"} {
		if err := os.WriteFile(file, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o, err := parseOptions([]string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", clientCA,
		"--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", caFile,
		"--admin-token-file", adminTok, "--peer-token-file", peerTok}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSecurity(o.security)
	if err != nil {
		t.Fatal(err)
	}
	before := s.client.Pool()

	// The client CA file now holds the cluster CA: every client would be
	// a node.
	b, _ := os.ReadFile(caFile)
	if err := os.WriteFile(clientCA, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.reload(); err == nil || !strings.Contains(err.Error(), "tls-client-ca: --peer-tls-ca trusts its CA CN=cluster") {
		t.Fatalf("reload of a client CA the peer CA trusts: %v", err)
	}
	if !s.client.Pool().Equal(before) {
		t.Fatal("the refused client CA is in use")
	}

	// The peer token file now holds the admin token.
	c, _ := clients.WriteCA(dir, "client-ca-again")
	b, _ = os.ReadFile(c)
	if err := os.WriteFile(clientCA, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(peerTok, []byte("admin-token-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.reload(); err == nil || !strings.Contains(err.Error(), "peer-token-file: holds the same token as --admin-token-file") {
		t.Fatalf("reload of the admin token as the peer token: %v", err)
	}
	if string(s.peerTok.Value()) != "peer-token-0123456789" {
		t.Fatalf("the refused peer token is in use: %q", s.peerTok.Value())
	}
	// Rotated to a token of its own, it is taken.
	if err := os.WriteFile(peerTok, []byte("peer-token-rotated-0123"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.reload(); err != nil {
		t.Fatal(err)
	}
	if string(s.peerTok.Value()) != "peer-token-rotated-0123" {
		t.Fatalf("peer token %q after a good rotation", s.peerTok.Value())
	}
}
