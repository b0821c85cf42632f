package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the lowest port handed out: clear of well-known services.
const lowest = 10000

var (
	mu     sync.Mutex
	cursor int // the last port handed out
)

// Addr returns "127.0.0.1:PORT" with PORT free for TCP and UDP and below
// the kernel's ephemeral range.
func Addr() (string, error) {
	hi := ephemeralLow()
	if hi-lowest < 1000 {
		return "", fmt.Errorf("freeport: the ephemeral range starts at %d, too low to pick below it", hi)
	}
	mu.Lock()
	defer mu.Unlock()
	if cursor == 0 {
		// A random start, so test processes running at once (go test
		// runs packages in parallel) are unlikely to walk the same ports.
		cursor = lowest + rand.IntN(hi-lowest)
	}
	for range 2000 {
		// Walk on from the last port handed out: a port is never handed
		// out twice by one process, since a node may bind it only later.
		if cursor++; cursor >= hi {
			cursor = lowest
		}
		addr := "127.0.0.1:" + strconv.Itoa(cursor)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err == nil {
			u.Close()
			return addr, nil
		}
	}
	return "", errors.New("freeport: no free port")
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux),
// or the common default where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil {
				return lo
			}
		}
	}
	return 32768
}
