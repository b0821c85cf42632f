package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// --max-log-length holds cluster-wide: a policy, or an inline limit, must
// fit every member's cap, whichever node it is sent to, and a node whose
// cap cannot hold a stored policy is refused as a member. Before, each
// node checked its own: a policy stored through a node of a larger cap
// answered the keys of some groups and was refused by the others'.
func TestMaxLogLengthIsTheClusters(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, "--max-log-length", "50000")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logPolicy := func(name string, limit int64) *pb.Policy {
		return &pb.Policy{Name: name, Limits: []*pb.PolicyLimit{{Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: limit, WindowMs: 60_000}}}}
	}
	n1 := c.Nodes[0]
	if _, err := n1.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{logPolicy("big", 40_000)}}); err != nil {
		t.Fatal(err)
	}

	// A node of the default cap (10,000) cannot hold "big": refused at
	// its join, naming its flag, and it stops.
	small, err := NewNode(c.Bin, t.TempDir(), "small")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(small.Close)
	if err := small.Start(n1.GRPC); err != nil {
		t.Fatal(err)
	}
	select {
	case <-small.Exited():
	case <-ctx.Done():
		t.Fatalf("a node too small for a stored policy is still running:\n%s", tail(small.Log(), 10))
	}
	if want := "max_log_length: node small's --max-log-length 10000 cannot hold policy big"; !strings.Contains(small.Log(), want) {
		t.Fatalf("the refusal does not say %q:\n%s", want, tail(small.Log(), 10))
	}

	// A node of cap 45,000 holds it, and joins: the cluster's cap is
	// now 45,000 on every node, n1 and n2 (50,000) included, the meta
	// leader and the others alike.
	mid, err := NewNode(c.Bin, t.TempDir(), "mid", "--max-log-length", "45000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mid.Close)
	c.Nodes = append(c.Nodes, mid)
	if err := mid.Start(n1.GRPC); err != nil {
		t.Fatal(err)
	}
	if err := mid.WaitServing(ctx); err != nil {
		t.Fatalf("mid: %v\n%s", err, tail(mid.Log(), 10))
	}
	for _, n := range []*Node{n1, c.Nodes[1], mid} {
		// The meta leader took mid's record before mid served: a policy
		// write through any node is refused at once.
		_, err := n.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{logPolicy("bigger", 48_000)}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "capped at 45000") {
			t.Fatalf("a policy over mid's cap, through %s: %v, want InvalidArgument capped at 45000", n.ID, err)
		}
		// A check is held to the node's own view, which may learn of mid a
		// moment later.
		waitFor(t, ctx, "an inline log over mid's cap refused through "+n.ID, func() error {
			_, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: "k", Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 48_000, WindowMs: 60_000}})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "capped at 45000") {
				return fmt.Errorf("got %v, want InvalidArgument capped at 45000", err)
			}
			return nil
		})
		if _, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: "k", Policy: "big"}); err != nil {
			t.Fatalf("a check of big through %s: %v", n.ID, err)
		}
	}
	// The nodes of a larger cap say whose cap they are held to: the
	// refusals name a number their operator did not give them.
	for _, n := range []*Node{n1, c.Nodes[1]} {
		waitFor(t, ctx, n.ID+" to name the member whose cap holds", func() error {
			if log := n.Log(); !strings.Contains(log, "held to a member's smaller --max-log-length") || !strings.Contains(log, "max_log_length=45000 node=mid") {
				return fmt.Errorf("not said yet:\n%s", tail(log, 5))
			}
			return nil
		})
	}

	// mid restarted with a cap that cannot hold big stops, naming it; the
	// cluster's cap does not fall to it (its record keeps 45,000), so the
	// stored policies are taken again as they are.
	mid.Stop()
	mid.Args = []string{"--max-log-length", "30000"}
	if err := mid.Start(n1.GRPC); err != nil {
		t.Fatal(err)
	}
	select {
	case <-mid.Exited():
	case <-ctx.Done():
		t.Fatalf("mid, restarted too small for big, still runs:\n%s", tail(mid.Log(), 10))
	}
	mid.Stop()
	if want := "max_log_length: node mid's --max-log-length 30000 cannot hold policy big"; !strings.Contains(mid.Log(), want) {
		t.Fatalf("mid's exit does not say %q:\n%s", want, tail(mid.Log(), 10))
	}
	if _, err := n1.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{logPolicy("big", 40_000)}}); err != nil {
		t.Fatalf("the stored big, applied again after mid's refused restart: %v", err)
	}
}
