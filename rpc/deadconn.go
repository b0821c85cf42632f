package rpc

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// deadConnAfter is how long data a node sent on a gRPC connection may go
// unacknowledged before the kernel drops the connection
// (TCP_USER_TIMEOUT), on the node's server and on its connections to
// peers. Behind a cut, TCP backs its retransmissions off: after a cut of
// ten seconds the next one may come seconds after the cut heals, and
// every call on the connection waits for it, while a connection dropped
// during the cut is dialed again at once. A live peer acknowledges within
// milliseconds, however slow its process is to read.
const deadConnAfter = 5 * time.Second

// serverKeepalive has gRPC set deadConnAfter on the server's connections
// (it sets the keepalive timeout as their TCP_USER_TIMEOUT); the server
// still pings an idle client only after gRPC's default two hours.
func serverKeepalive() grpc.ServerOption {
	return grpc.KeepaliveParams(keepalive.ServerParameters{Timeout: deadConnAfter})
}

// peerDialer dials a peer with deadConnAfter set on the connection, host
// names looked up with r (nil: the system's resolver). No gRPC keepalive
// on the client side: a node of an older release would answer its pings
// with GOAWAY, and the kernel's timeout needs nothing from the peer.
func peerDialer(r *net.Resolver) grpc.DialOption { return grpc.WithContextDialer(dialPeer(r)) }

func dialPeer(r *net.Resolver) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{Resolver: r, Control: setUserTimeout(deadConnAfter)}
		return d.DialContext(ctx, "tcp", addr)
	}
}
