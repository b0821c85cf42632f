package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

// A node of three dead past --dead-after keeps its votes where no live
// node can take them (the meta group, and every group it held): two of
// three survive no other failure, like two of two, but once it returns
// it and one survivor serve again. Dropped, the groups and the meta
// group would be two of two, and a second failure would stop them for
// good, two live nodes notwithstanding.
func TestADeadNodeOfThreeKeepsItsVotes(t *testing.T) {
	nodes := inproc.SlotCluster(t, 3, 64)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n1.Stop()
	inproc.Eventually(t, time.Minute, "n1 marked dead and its groups rehomed", func() error {
		v := n2.Node.View()
		if m := v.Node("n1"); m == nil || m.State != metav1.NodeState_NODE_STATE_DEAD {
			return errors.New("n1 not dead yet")
		}
		for _, g := range v.Groups {
			if g.Home == "n1" {
				return fmt.Errorf("group %d still homed at n1", g.ID)
			}
		}
		return nil
	})
	time.Sleep(2 * time.Second) // reconcile rounds that used to drop n1's votes
	n3.Stop()
	n1.Restart()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inproc.Eventually(t, time.Minute, "n1 and n2 answer checks of every group", func() error {
		for i := range 64 {
			req := &pb.AllowRequest{Key: fmt.Sprintf("k%d", i), Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 100, WindowMs: 60_000}}
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := n2.Limiter().Allow(cctx, req)
			ccancel()
			if err != nil {
				return fmt.Errorf("key k%d: %w", i, err)
			}
		}
		return nil
	})
}

// A leave beside a dead node: of three, n3 dead (its votes kept) and n2
// leaving. Every group, the meta group among them, must drop the dead
// voter before the leaving one: dropping n2 first left two voters, n3
// dead among them, so the change never committed and the group had no
// leader until n3 returned; n1 alone must end up serving every group.
func TestLeaveBesideADeadNode(t *testing.T) {
	nodes := inproc.SlotCluster(t, 3, 64)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n3.Stop()
	inproc.Eventually(t, time.Minute, "n3 marked dead and its groups rehomed", func() error {
		v := n1.Node.View()
		if m := v.Node("n3"); m == nil || m.State != metav1.NodeState_NODE_STATE_DEAD {
			return errors.New("n3 not dead yet")
		}
		for _, g := range v.Groups {
			if g.Home == "n3" {
				return fmt.Errorf("group %d still homed at n3", g.ID)
			}
		}
		return nil
	})
	time.Sleep(2 * time.Second) // reconcile rounds that settle the groups beside the dead node
	leave(t, n1, n2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inproc.Eventually(t, 30*time.Second, "n1 alone answers checks of every group", func() error {
		for i := range 64 {
			req := &pb.AllowRequest{Key: fmt.Sprintf("k%d", i), Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 100, WindowMs: 60_000}}
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := n1.Limiter().Allow(cctx, req)
			ccancel()
			if err != nil {
				return fmt.Errorf("key k%d: %w", i, err)
			}
		}
		return nil
	})
}
