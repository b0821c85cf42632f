package cluster

import (
	"fmt"
	"net"
	"strconv"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/window"
)

// maxNodeIDLen bounds a node id: it names Raft servers and travels in
// every meta snapshot.
const maxNodeIDLen = 128

// maxJoinAddrs bounds the addresses a join request may list.
const maxJoinAddrs = 64

// CheckAddr reports why addr, given as field (a flag or an API field), is
// not an address another node can dial: host:port, with a host name or IP
// and a port from 1 to 65535. Whether the host resolves is not checked:
// that can change, and is retried.
func CheckAddr(field, addr string) error {
	return checkAddr(field, addr, 1)
}

// CheckListenAddr is CheckAddr for an address this node listens on, where
// port 0 (any free port) is allowed.
func CheckListenAddr(field, addr string) error {
	return checkAddr(field, addr, 0)
}

// maxAddrLen is the longest host:port: a 253-byte name, brackets, a port.
const maxAddrLen = 263

func checkAddr(field, addr string, minPort int) error {
	if len(addr) > maxAddrLen {
		// Not echoed: the message must stay readable.
		return fmt.Errorf("%w: %s: %d bytes is too long for host:port", ErrConfig, field, len(addr))
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %s: %q is not host:port", ErrConfig, field, addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < minPort || p > 65535 {
		return fmt.Errorf("%w: %s: %q: port must be a number from %d to 65535", ErrConfig, field, addr, minPort)
	}
	if net.ParseIP(host) == nil && !validHostName(host) {
		return fmt.Errorf("%w: %s: %q: host must be a name or an IP address", ErrConfig, field, addr)
	}
	return nil
}

// validHostName accepts "" (this host) and DNS-style names: letters,
// digits, '-', '_' and dots, up to 253 bytes.
func validHostName(h string) bool {
	if len(h) > 253 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// CheckNodeID reports why id, given as field, cannot name a node.
func CheckNodeID(field, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: %s: required", ErrConfig, field)
	case len(id) > maxNodeIDLen:
		return fmt.Errorf("%w: %s: %d bytes is longer than %d", ErrConfig, field, len(id), maxNodeIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("%w: %s: %q must not contain spaces or control characters", ErrConfig, field, id)
		}
	}
	return nil
}

// checkNode reports the first unusable field of a node asking to be
// added, under its API path ("node.raft_addr").
func checkNode(node *metav1.Node) error {
	if node == nil {
		return fmt.Errorf("%w: node: required", ErrConfig)
	}
	if err := CheckNodeID("node.id", node.Id); err != nil {
		return err
	}
	for _, a := range []struct{ field, addr string }{
		{"node.grpc_addr", node.GrpcAddr}, {"node.raft_addr", node.RaftAddr}, {"node.gossip_addr", node.GossipAddr},
	} {
		if err := CheckAddr(a.field, a.addr); err != nil {
			return err
		}
	}
	if node.HttpAddr != "" {
		if err := CheckAddr("node.http_addr", node.HttpAddr); err != nil {
			return err
		}
	}
	if node.Region != "" {
		if err := CheckNodeID("node.region", node.Region); err != nil {
			return err
		}
	}
	if !validIncarnation(node.Incarnation) {
		return fmt.Errorf("%w: node.incarnation: want 32 lowercase hex digits, got %d bytes", ErrConfig, len(node.Incarnation))
	}
	if len(node.Version) > maxNodeIDLen {
		return fmt.Errorf("%w: node.version: %d bytes is longer than %d", ErrConfig, len(node.Version), maxNodeIDLen)
	}
	if node.MaxLogLength < 0 || node.MaxLogLength > window.MaxLogLength {
		// 0 is an older release's: it tells none.
		return fmt.Errorf("%w: node.max_log_length: must be between 0 and %d, got %d", ErrConfig, window.MaxLogLength, node.MaxLogLength)
	}
	return nil
}

// IsLoopback reports whether addr (host:port) listens on loopback only:
// a loopback IP or "localhost". An empty host listens everywhere.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
