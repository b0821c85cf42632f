package deadconn

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// After is how long data sent on a connection may go unacknowledged
// before the kernel drops the connection. A live peer acknowledges within
// milliseconds, however slow its process is to read.
const After = 5 * time.Second

// ServerOption has gRPC set After on the server's connections (it sets
// the keepalive timeout as their TCP_USER_TIMEOUT; its default is 20 s);
// the server still pings an idle client only after gRPC's default two
// hours.
func ServerOption() grpc.ServerOption {
	return grpc.KeepaliveParams(keepalive.ServerParameters{Timeout: After})
}

// DialOption dials with After set on the connection, host names looked up
// with r (nil: the system's resolver). It is not gRPC keepalive: a server
// of an older release would answer a client's pings with GOAWAY, and the
// kernel's timeout needs nothing from the peer.
func DialOption(r *net.Resolver) grpc.DialOption { return grpc.WithContextDialer(Dial(r)) }

// Dial is DialOption's dialer.
func Dial(r *net.Resolver) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{Resolver: r, Control: setUserTimeout(After)}
		return d.DialContext(ctx, "tcp", addr)
	}
}
