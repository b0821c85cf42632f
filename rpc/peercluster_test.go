package rpc

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
)

// progressPeer answers ShardProgress and Hello, counting the calls that
// reached it.
type progressPeer struct {
	peerv1.UnimplementedPeerServer
	calls atomic.Int64
}

func (c *progressPeer) ShardProgress(context.Context, *peerv1.ShardProgressRequest) (*peerv1.ShardProgressResponse, error) {
	c.calls.Add(1)
	return &peerv1.ShardProgressResponse{Present: true}, nil
}

func (c *progressPeer) Hello(context.Context, *peerv1.HelloRequest) (*peerv1.HelloResponse, error) {
	c.calls.Add(1)
	return &peerv1.HelloResponse{ClusterId: "c1"}, nil
}

// A Peer call names the caller's cluster, and a node of another cluster
// refuses it, Unavailable and naming both, before it does anything (a
// member's address reused by a node of another cluster); a caller that
// names none (a fresh node, an older release) is taken, and Hello, which
// asks a node's cluster, is taken from anyone.
func TestPeerCallsOfAnotherClusterAreRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admit := func(theirs string) error {
		if theirs != "" && theirs != "c1" {
			return fmt.Errorf("a node of cluster %s; this node is of cluster c1", theirs)
		}
		return nil
	}
	srv := &progressPeer{}
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(admitPeerCalls(admit)))
	peerv1.RegisterPeerServer(gs, srv)
	go gs.Serve(ln)
	defer gs.Stop()

	for _, tc := range []struct {
		cluster string
		refused bool
	}{{"c1", false}, {"", false}, {"c2", true}} {
		peers := NewPeers()
		if tc.cluster != "" {
			peers.NameCluster(func() string { return tc.cluster })
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		before := srv.calls.Load()
		_, err := peers.Progress(ctx, ln.Addr().String(), 0)
		switch {
		case tc.refused && (status.Code(toStatus(err)) != codes.Unavailable || !strings.Contains(err.Error(), "a node of cluster c2; this node is of cluster c1")):
			t.Errorf("cluster %q: %v, want Unavailable naming both clusters", tc.cluster, err)
		case tc.refused && srv.calls.Load() != before:
			t.Errorf("cluster %q: the refused call reached the service", tc.cluster)
		case !tc.refused && err != nil:
			t.Errorf("cluster %q: %v", tc.cluster, err)
		}
		if _, _, err := peers.Hello(ctx, ln.Addr().String()); err != nil {
			t.Errorf("cluster %q: Hello: %v", tc.cluster, err)
		}
		cancel()
		peers.Close()
	}
}
