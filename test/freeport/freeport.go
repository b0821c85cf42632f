// Package freeport finds loopback ports for test nodes to listen on. A
// port the kernel hands out for ":0" comes from the ephemeral range, the
// same range it takes source ports of outgoing connections from: between
// the test closing it and the node binding it, any connection may take
// it ("address already in use"). Ports below that range are never taken
// that way, so this picks them, free for both TCP and UDP (memberlist
// needs both).
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the lowest port handed out: clear of well-known services.
const lowest = 10000

// Addr returns "127.0.0.1:PORT" with PORT free for TCP and UDP and below
// the kernel's ephemeral range.
func Addr() (string, error) {
	hi := ephemeralLow()
	if hi-lowest < 1000 {
		return "", fmt.Errorf("freeport: the ephemeral range starts at %d, too low to pick below it", hi)
	}
	for range 200 {
		addr := "127.0.0.1:" + strconv.Itoa(lowest+rand.IntN(hi-lowest))
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
