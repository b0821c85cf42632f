package client

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// unavailableNode answers every check Unavailable at once (a group with
// no quorum): the node was reached, and answered.
type unavailableNode struct {
	pb.UnimplementedRateLimiterServer
}

func (unavailableNode) Allow(context.Context, *pb.AllowRequest) (*pb.AllowResponse, error) {
	return nil, status.Error(codes.Unavailable, "shard 0: no leader")
}

// Every check that fails kicks a refresh of the routes, and refreshes
// come at most every minRefreshGap: one caller on a group with no leader
// had its client ask a node its status 6,370 times in a second.
func TestRefreshesArePacedWhileChecksFail(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adm := &statusNode{answers: 1 << 30}
	s := grpc.NewServer()
	pb.RegisterAdminServer(s, adm)
	pb.RegisterRateLimiterServer(s, unavailableNode{})
	go s.Serve(lis)
	defer s.Stop()
	adm.nodes = []string{lis.Addr().String()}
	c, err := New(context.Background(), Options{Addrs: adm.nodes, FailOpen: true, NoCoalescing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := adm.calls.Load()
	const span = time.Second
	checks := 0
	for end := time.Now().Add(span); time.Now().Before(end); checks++ {
		d, err := c.Decide(context.Background(), &pb.AllowRequest{Key: "k", Limit: batchLimit})
		if err != nil || !d.FailedOpen {
			t.Fatalf("check %d: %+v, %v: want admitted unanswered", checks, d, err)
		}
	}
	// One at the start of the second, one per gap after it, and one the
	// last kick may start as the second ends.
	if got, most := adm.calls.Load()-before, int64(span/minRefreshGap)+2; got > most || checks < 20 {
		t.Fatalf("%d checks failed in %v and the client asked for the routes %d times, want at most %d", checks, span, got, most)
	}
}
