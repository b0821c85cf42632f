package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// pidOf finds the process started with --data-dir dataDir (the e2e harness
// gives every node its own data dir) by reading /proc/*/cmdline.
func pidOf(dataDir string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		for i, a := range args {
			if (a == "--data-dir" && i+1 < len(args) && args[i+1] == dataDir) || a == "--data-dir="+dataDir {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no process with --data-dir %s", dataDir)
}

// cpuTicks returns utime+stime of pid, in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted from after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime %q %q", pid, f[11], f[12])
	}
	return ut + st, nil
}

// tcpEstablished is the state of an established socket in /proc/net/tcp.
const tcpEstablished = "01"

// raftConnections counts the established TCP connections to the given
// ports (the nodes' raft ports) on this host: sockets whose remote port is
// one of them, so that each loopback connection counts once, from its
// dialing end.
func raftConnections(ports map[int]bool) (int, error) {
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		c, err := countRemotePorts(f, ports)
		if err != nil && !os.IsNotExist(err) {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// countRemotePorts counts the established sockets of one /proc/net/tcp*
// file whose remote port is in ports.
func countRemotePorts(path string, ports map[int]bool) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	n := 0
	for sc.Scan() {
		// sl local_address rem_address st ...; addresses are HEXIP:HEXPORT.
		fl := strings.Fields(sc.Text())
		if len(fl) < 4 || fl[3] != tcpEstablished {
			continue
		}
		j := strings.LastIndexByte(fl[2], ':')
		if j < 0 {
			continue
		}
		port, err := strconv.ParseInt(fl[2][j+1:], 16, 32)
		if err == nil && ports[int(port)] {
			n++
		}
	}
	return n, sc.Err()
}

// portOf returns the port of a host:port address.
func portOf(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}
