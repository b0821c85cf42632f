package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/tlsconf"
)

// A node without --gossip-key warns when gossip listens beyond loopback,
// as it does for the other ports: it used to say nothing, though anyone
// who reaches that port may read and forge members.
func TestWarnIfOpenGossip(t *testing.T) {
	s, err := newSecurity(securityFlags{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	s.warnIfOpen(binds{grpc: "127.0.0.1:7700", raft: "127.0.0.1:7702", gossip: "127.0.0.1:7703"}, log)
	if buf.Len() != 0 {
		t.Fatalf("warned on loopback: %s", buf.String())
	}
	s.warnIfOpen(binds{grpc: "127.0.0.1:7700", raft: "127.0.0.1:7702", gossip: "0.0.0.0:7703"}, log)
	if !strings.Contains(buf.String(), "set --gossip-key") {
		t.Fatalf("no warning for plaintext gossip beyond loopback: %q", buf.String())
	}
	buf.Reset()
	s.gossipKeys = [][]byte{make([]byte, 32)}
	s.warnIfOpen(binds{grpc: "127.0.0.1:7700", raft: "127.0.0.1:7702", gossip: "0.0.0.0:7703"}, log)
	if buf.Len() != 0 {
		t.Fatalf("warned with a gossip key: %s", buf.String())
	}
}

// With nothing secured on a client port beyond loopback, both holes are
// named: Admin and Peer calls are open, and the operator who closes one
// must still be told of the other.
func TestWarnIfOpenNamesEveryHole(t *testing.T) {
	s, err := newSecurity(securityFlags{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	s.warnIfOpen(binds{grpc: "0.0.0.0:7700", raft: "0.0.0.0:7702", gossip: "0.0.0.0:7703"}, slog.New(slog.NewTextHandler(&buf, nil)))
	for _, want := range []string{"Admin calls are open", "Peer calls are open", "Raft port is plaintext", "gossip is plaintext"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no warning %q in:\n%s", want, buf.String())
		}
	}
}

// A certificate near its end is a warning naming its flag and when it
// ends; one past its end is an error that says callers refuse it.
func TestWarnExpiry(t *testing.T) {
	var buf bytes.Buffer
	warn := warnExpiry(slog.New(slog.NewTextHandler(&buf, nil)))
	warn("tls-cert", time.Now().Add(5*24*time.Hour))
	warn("peer-tls-cert", time.Now().Add(-time.Hour))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log:\n%s", buf.String())
	}
	for i, want := range []string{`level=WARN msg="the certificate of --tls-cert expires soon`, `level=ERROR msg="the certificate of --peer-tls-cert has expired: callers that verify it refuse`} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "not_after=") {
			t.Errorf("line %d: %s\nwant %s and not_after", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[0], "in=120h0m0s") {
		t.Errorf("the warning does not say how long is left: %s", lines[0])
	}
}

// With TLS configured, a node that would listen beyond loopback with a
// plane open refuses to start, naming each hole: it used to warn and
// serve, and a caller with no certificate nor token stored a policy on a
// node whose --tls-cert and --peer-tls-* were set. On loopback, or with
// every plane closed, it starts.
func TestTLSRefusesOpenPlanes(t *testing.T) {
	dir := t.TempDir()
	ca, _ := tlsconf.NewCA("cluster")
	caFile, _ := ca.WriteCA(dir, "ca")
	cert, key, err := ca.Issue(dir, "node", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	adminTok := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(adminTok, []byte("admin-token-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsFlags := []string{"--tls-cert", cert, "--tls-key", key, "--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", caFile}
	everywhere := []string{"--advertise-host", "127.0.0.1", "--grpc-addr", "0.0.0.0:7700", "--raft-addr", "0.0.0.0:7702", "--gossip-addr", "0.0.0.0:7703"}
	check := func(args ...string) error {
		o, err := parseOptions(append([]string{"--check-config", "--data-dir", filepath.Join(dir, "data")}, args...), noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return checkConfig(o)
	}
	err = check(append(tlsFlags, everywhere...)...)
	for _, want := range []string{"grpc-addr: TLS is configured, but Admin calls are open", "gossip-addr: TLS is configured, but gossip is plaintext"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("TLS with holes beyond loopback: %v, want %q", err, want)
		}
	}
	closed := append(append(tlsFlags, everywhere...), "--admin-token-file", adminTok, "--gossip-key", "RD/MfEpCdLGl7JZSd7VYXSVeS5CSpLnrU4Zox8XKsX8=")
	if err := check(closed...); err != nil {
		t.Errorf("TLS with every plane closed: %v", err)
	}
	if err := check(tlsFlags...); err != nil {
		t.Errorf("TLS on loopback: %v", err)
	}
	// Profiles need the admin role too (README): served beyond loopback
	// with none configured, they were open to anyone.
	// --advertise-host: else the test would need a machine of one address.
	profiles := append(append([]string{}, tlsFlags...), "--http-addr", "0.0.0.0:7701", "--advertise-host", "127.0.0.1")
	if err := check(append(profiles, "--pprof")...); err == nil || !strings.Contains(err.Error(), "http-addr: TLS is configured, but profiles (--pprof) are open") {
		t.Errorf("TLS with open profiles beyond loopback: %v", err)
	}
	if err := check(profiles...); err != nil {
		t.Errorf("TLS, HTTP beyond loopback without profiles: %v", err)
	}
	if err := check(everywhere...); err != nil {
		t.Errorf("no TLS beyond loopback (warned, not refused): %v", err)
	}

	// A peer token in place of peer TLS leaves the Raft port plaintext,
	// and open to anyone who reaches it.
	o, err := parseOptions(append(closed, "--check-config"), noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSecurity(o.security)
	if err != nil {
		t.Fatal(err)
	}
	s.peer, s.rules.PeerCAs, s.rules.PeerToken = nil, nil, func() [][]byte { return [][]byte{[]byte("peer-token-0123456789")} }
	if err := s.refuseOpen(binds{grpc: "0.0.0.0:7700", raft: "0.0.0.0:7702", gossip: "0.0.0.0:7703"}); err == nil || !strings.Contains(err.Error(), "raft-addr: TLS is configured, but the Raft port is plaintext") {
		t.Errorf("TLS with a plaintext Raft port beyond loopback: %v", err)
	}
	if err := s.refuseOpen(binds{grpc: "0.0.0.0:7700", raft: "127.0.0.1:7702", gossip: "0.0.0.0:7703"}); err != nil {
		t.Errorf("TLS, Raft on loopback, peer token: %v", err)
	}
}
