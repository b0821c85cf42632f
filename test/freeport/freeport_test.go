package freeport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
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

// A port another test process holds (its lock file locked) is not handed
// out, and a port handed out stays held by this process: a node restarted
// on it later finds it free of other processes' nodes.
func TestAddrSkipsPortsHeldElsewhere(t *testing.T) {
	if _, err := Addr(); err != nil { // sets the cursor
		t.Fatal(err)
	}
	mu.Lock()
	next := cursor
	mu.Unlock()
	// The next port no other test process holds, locked through another
	// open file: flock treats it as another process's lock.
	var other *os.File
	for other == nil {
		next++
		f, err := os.OpenFile(filepath.Join(reserveDir, strconv.Itoa(next)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		other = f
	}
	defer other.Close()
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	if addr == "127.0.0.1:"+strconv.Itoa(next) {
		t.Fatalf("%s handed out while another process held it", addr)
	}
	_, p, _ := net.SplitHostPort(addr)
	f, err := os.OpenFile(filepath.Join(reserveDir, p), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("no lock file for %s: %v", addr, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatalf("%s, handed out, is not held", addr)
	}
}
