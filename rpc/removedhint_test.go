package rpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

// A node that left its cluster and is started again on its data dir
// without --join waits for nothing: no member will contact it. Its start
// says so and how to join again, instead of blaming voters that run where
// it says (found by hand: leave, then restart with the same flags).
func TestRemovedNodeResumingSaysItWasRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster of three in-process nodes")
	}
	nodes := inproc.SlotCluster(t, 3, 32)
	gone := nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := nodes[0].Admin().Leave(ctx, &pb.LeaveRequest{NodeId: gone.ID}); err != nil {
		t.Fatal(err)
	}
	inproc.Eventually(t, 30*time.Second, "the node removed", func() error {
		if nodes[0].Node.View().Node(gone.ID) != nil {
			return context.DeadlineExceeded
		}
		return nil
	})
	// The entry that took it out of the meta group reaches it (raft
	// replicates a removal to the removed server): what it resumes from.
	inproc.Eventually(t, 30*time.Second, "the removal replicated to the node", func() error {
		if gone.Node.InOwnMetaConfiguration() {
			return context.DeadlineExceeded
		}
		return nil
	})
	gone.Stop()
	cfg := gone.Cfg
	cfg.Join = nil
	n := inproc.Open(t, cfg)
	sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer scancel()
	err := n.Node.Start(sctx)
	if err == nil || !strings.Contains(err.Error(), "removed from its cluster") || !strings.Contains(err.Error(), "--join") {
		t.Fatalf("start: %v; want it to say the node was removed and to start it with --join", err)
	}
}
