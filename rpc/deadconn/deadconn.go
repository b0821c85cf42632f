package deadconn

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// After is how long data sent on a connection may go unacknowledged
// before the kernel drops the connection (Linux; elsewhere gRPC sets no
// TCP_USER_TIMEOUT and these options only bound keepalive pings). A live
// peer acknowledges within milliseconds; one whose process stopped
// reading for longer, with its receive window full, is dropped too.
const After = 5 * time.Second

// idlePing is how long a client's connection with a call open may receive
// nothing before it pings the server. Only the ping's timeout matters
// here (gRPC sets it as the connection's TCP_USER_TIMEOUT); a server
// answers pings more often than its enforcement minimum (five minutes by
// default, also in older releases of floodgate) with GOAWAY, so the pings
// stay rarer than that.
const idlePing = 10 * time.Minute

// ServerOption has gRPC set After on the server's connections (it sets the
// keepalive timeout as their TCP_USER_TIMEOUT; its default is 20 s); the
// server still pings an idle client only after gRPC's default two hours.
func ServerOption() grpc.ServerOption {
	return grpc.KeepaliveParams(keepalive.ServerParameters{Timeout: After})
}

// DialOption has gRPC set After on a client's connections. It keeps gRPC's
// own dialer, so proxies and unix: addresses work as before.
func DialOption() grpc.DialOption {
	return grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: idlePing, Timeout: After})
}
