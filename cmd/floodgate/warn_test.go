package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
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
	s.gossipKey = make([]byte, 32)
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
