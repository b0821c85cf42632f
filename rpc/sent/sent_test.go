package sent

import (
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

func TestNever(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7700}
	for _, c := range []struct {
		name string
		err  error
		peer peer.Peer
		want bool
	}{
		{"succeeded", nil, peer.Peer{}, false},
		{"no connection could be made", status.Error(codes.Unavailable, "connection refused"), peer.Peer{}, true},
		{"connection broke during the call", status.Error(codes.Unavailable, "transport is closing"), peer.Peer{Addr: addr}, false},
		{"deadline before a connection", status.Error(codes.DeadlineExceeded, "deadline"), peer.Peer{}, false},
		{"server refused", status.Error(codes.PermissionDenied, "no"), peer.Peer{Addr: addr}, false},
		{"not a status", errors.New("boom"), peer.Peer{}, false},
	} {
		if got := Never(c.err, &c.peer); got != c.want {
			t.Errorf("%s: Never = %v, want %v", c.name, got, c.want)
		}
	}
}
