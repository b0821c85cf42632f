package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
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
	s.warnIfOpen("127.0.0.1:7700", "127.0.0.1:7702", "127.0.0.1:7703", log)
	if buf.Len() != 0 {
		t.Fatalf("warned on loopback: %s", buf.String())
	}
	s.warnIfOpen("127.0.0.1:7700", "127.0.0.1:7702", "0.0.0.0:7703", log)
	if !strings.Contains(buf.String(), "set --gossip-key") {
		t.Fatalf("no warning for plaintext gossip beyond loopback: %q", buf.String())
	}
	buf.Reset()
	s.gossipKeys = [][]byte{make([]byte, 32)}
	s.warnIfOpen("127.0.0.1:7700", "127.0.0.1:7702", "0.0.0.0:7703", log)
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
	s.warnIfOpen("0.0.0.0:7700", "0.0.0.0:7702", "0.0.0.0:7703", slog.New(slog.NewTextHandler(&buf, nil)))
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
