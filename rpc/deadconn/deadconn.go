package deadconn

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
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

// MaxRedialDelay bounds the wait between attempts to dial a connection
// whose peer is down. gRPC's default grows to two minutes: a node back
// after a deploy or an outage of a minute would get no calls on that
// connection for as long again (a node's forwards, the SDK's checks go
// round it meanwhile, an extra hop). A refused dial costs the peer next
// to nothing, so once a second is cheap.
const MaxRedialDelay = time.Second

// minConnectTimeout is how long one dial may take (gRPC's default is 20 s,
// which a blackholed address waits out before the next attempt); two
// seconds is many round trips and a TLS handshake on any link a node or a
// client talks over.
const minConnectTimeout = 2 * time.Second

// Redial has gRPC dial a connection whose peer is down again within
// MaxRedialDelay, so that a node that comes back is used again within a
// second, however long it was gone.
func Redial() grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: MaxRedialDelay},
		MinConnectTimeout: minConnectTimeout,
	})
}
