package rpc

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/authz"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	"github.com/floodgate/floodgate/window"
)

// A check forwarded to a leader that refuses this node's peer credentials
// answers its caller Unavailable, naming the peer credentials: it used to
// answer the peer's PermissionDenied or Unauthenticated ("the caller's
// credentials do not grant the peer role"), as if the caller's own
// credentials were at fault, and HTTP callers got 403.
func TestForwardRefusedByPeerIsUnavailable(t *testing.T) {
	peerToken := func() [][]byte { return [][]byte{[]byte("peer-token-0123456789")} }
	rules := &authz.Rules{PeerToken: peerToken}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(rules.UnaryInterceptor()))
	peerv1.RegisterPeerServer(gs, &stalledPeer{}) // never reached
	go gs.Serve(ln)
	defer gs.Stop()
	pol := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: int64(time.Minute)}}}}
	checks := []fsm.Check{{Key: "k", Policy: pol, Cost: 1}}

	for name, opts := range map[string][]grpc.DialOption{
		"no token":    nil,
		"wrong token": {grpc.WithPerRPCCredentials(authz.Bearer(func() []byte { return []byte("wrong-token-0123456789") }, false))},
	} {
		peers := NewPeers(opts...)
		f := newForwarder(peers, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := f.forward(ctx, ln.Addr().String(), 0, checks)
		cancel()
		peers.Close()
		if got := status.Code(toStatus(err)); got != codes.Unavailable {
			t.Errorf("%s: the caller gets %v (%v), want Unavailable", name, got, err)
		}
		if err == nil || !strings.Contains(err.Error(), "refused this node's peer credentials") {
			t.Errorf("%s: %v, want the peer credentials named", name, err)
		}
	}
}
