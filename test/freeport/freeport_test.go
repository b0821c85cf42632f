package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Ports come from below the ephemeral range, and are free for TCP and UDP.
func TestAddr(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if port < lowest || port >= ephemeralLow() {
			t.Fatalf("port %d outside [%d, %d)", port, lowest, ephemeralLow())
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("tcp %s: %v", addr, err)
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			t.Fatalf("udp %s: %v", addr, err)
		}
		u.Close()
	}
}
