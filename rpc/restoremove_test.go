package rpc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/policy"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc"
	"github.com/floodgate/floodgate/test/inproc"
)

// A restore planned before slots moved (here, after its policies are
// stored, a second node joins and its new group takes half the slots)
// writes each key's states to the group that owns the key when they are
// written: the group that lost the slots refuses its pieces as moved
// (nothing written), and they are split again by the new table. The
// restore failed, and failed again when re-run while moves went on.
func TestRestoreWhileSlotsMove(t *testing.T) {
	if testing.Short() {
		t.Skip("three in-process nodes")
	}
	const slots, keys = 8, 200
	one := func(c *cluster.Config) { c.Shards, c.Slots, c.Replicas = 0, slots, 1 }
	ctx := context.Background()
	src := inproc.ClusterOf(t, 1, one)[0]
	if _, err := src.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{
		{Name: "saved", Limits: []*pb.PolicyLimit{pl("m", pb.Algorithm_SLIDING_LOG, 10, 60_000)}}}}); err != nil {
		t.Fatal(err)
	}
	// A sliding log, not a fixed window: a fixed window ends at the next
	// epoch-aligned hour, and one passing between the counting and the
	// assertions below reset the counts (about one run in a few hundred).
	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: time.Hour.Milliseconds()}
	req := &pb.AllowBatchRequest{}
	for k := range keys {
		req.Requests = append(req.Requests, &pb.AllowRequest{Key: fmt.Sprintf("moving-%d", k), Limit: lim})
	}
	if _, err := src.Limiter().AllowBatch(ctx, req); err != nil {
		t.Fatal(err)
	}
	data := saveBackup(t, src)

	dst := inproc.ClusterOf(t, 1, one)[0]
	peers := rpc.NewPeers()
	t.Cleanup(func() { peers.Close() })
	cfg := dst.RPC
	cfg.LeaderWait = 2 * time.Second // NewServer's default, which NewAdminServer does not fill
	a := rpc.NewAdminServer(dst.Node, peers, cfg)
	_, err := rpc.RestoreWith(ctx, a, data,
		func(ctx context.Context, ps []*policy.Policy, own func(context.Context, []*policy.Policy) error) error {
			if err := own(ctx, ps); err != nil {
				return err
			}
			// The plan is made: now half the slots move to n2's new group.
			n2 := inproc.Config(t, "n2")
			one(&n2)
			n2.Join = []string{dst.Cfg.GRPCAddr}
			inproc.Start(t, n2)
			waitHalfMoved(t, dst, slots)
			return nil
		})
	if err != nil {
		t.Fatalf("restore while slots moved: %v", err)
	}
	for k := range keys {
		resp, err := dst.Limiter().Allow(ctx, &pb.AllowRequest{Key: fmt.Sprintf("moving-%d", k), Limit: lim, Cost: ptr(int64(0))})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Remaining != 9 {
			t.Fatalf("key moving-%d has %d left after the restore, want 9", k, resp.Remaining)
		}
	}
}
