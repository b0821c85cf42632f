package rpc_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/cluster"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

// A cluster in the middle of a rolling upgrade, n2 still on the legacy
// Raft transport (NetworkTransport per group, no raftnet) and the others
// on raftnet, forms, moves its slots and answers strict checks exactly
// through every node. With n1 stopped, every group's quorum is n2 and n3,
// which only works if each reaches the other through NetworkTransport:
// the counts are all there.
func TestMixedRaftTransportsServeExactCounts(t *testing.T) {
	nodes := inproc.ClusterOf(t, 3, func(c *cluster.Config) {
		if c.NodeID == "n2" {
			c.RaftTransport = cluster.TransportLegacy
		}
	})
	ctx := context.Background()
	limit := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 4, WindowMs: 3_600_000}
	const keys = 24 // keys in every group
	for k := range keys {
		key := fmt.Sprintf("mixed-%d", k)
		allowed := 0
		for call := range 6 {
			n := nodes[(k+call)%len(nodes)]
			resp, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: key, Limit: limit})
			if err != nil {
				t.Fatalf("%s via %s: %v", key, n.ID, err)
			}
			if resp.Allowed {
				allowed++
			}
		}
		if allowed != 4 {
			t.Fatalf("%s: %d of 6 allowed under a limit of 4", key, allowed)
		}
	}
	nodes[0].Stop()
	for k := range keys {
		key := fmt.Sprintf("mixed-%d", k)
		n := nodes[1+k%2]
		resp, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: key, Limit: limit, Cost: cost(0)})
		if err != nil {
			t.Fatalf("with n1 stopped, %s via %s: %v", key, n.ID, err)
		}
		if resp.Remaining != 0 {
			t.Fatalf("with n1 stopped, %s has %d left, want 0: counts were lost", key, resp.Remaining)
		}
	}
}
