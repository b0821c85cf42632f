package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
		lock, ok := reserve(cursor)
		if !ok {
			continue // another test process handed it out
		}
		addr := "127.0.0.1:" + strconv.Itoa(cursor)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			lock.Close() // not handed out: no need to hold it
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err == nil {
			u.Close()
			held = append(held, lock)
			return addr, nil
		}
		lock.Close()
	}
	return "", errors.New("freeport: no free port")
}

// reserveDir holds a lock file per port handed out by a test process.
var reserveDir = filepath.Join(os.TempDir(), "floodgate-freeport")

// held keeps the lock files of the ports handed out open, and so locked,
// for the life of the process.
var held []*os.File

// reserve locks port's file for this process: a node stopped and started
// again on its ports (a restart) leaves them free meanwhile, and another
// test process, walking its own ports, could otherwise take one (go test
// runs packages at once), and the restart fail on a taken port. The lock
// goes with the process, however it ends; Addr keeps it while the port is
// handed out, and closes it otherwise. Where no lock can be taken at all
// (no temp dir), the port is only checked free (a nil file).
func reserve(port int) (*os.File, bool) {
	if err := os.MkdirAll(reserveDir, 0o777); err != nil {
		return nil, true
	}
	f, err := os.OpenFile(filepath.Join(reserveDir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
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
