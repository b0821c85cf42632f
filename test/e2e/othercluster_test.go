package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// A member's name and addresses taken by a node of another cluster while
// the member is down (a pod or VM whose IP came back in another
// cluster's StatefulSet, ports and name alike): the member's groups keep
// calling that address over Raft. A node that took those calls would
// take the other cluster's log for its own, and its answers would count
// as the member's in the other cluster's commits. Both sides refuse at
// the Raft handshake, naming both clusters; each cluster keeps its own
// state and serves, and the member, back, is replicated to again.
func TestMemberAddressTakenByAnotherClusterIsRefused(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ours := st.ClusterId
	keys := oneKeyPerShard(st, "taken-addr")
	allow := func(n *Node, key string, cost int64) *pb.AllowResponse {
		t.Helper()
		resp, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: key, Limit: slidingLog(5, time.Hour), Cost: &cost})
		if err != nil {
			t.Fatalf("%s at %s: %v", key, n.ID, err)
		}
		return resp
	}
	for _, k := range keys {
		allow(c.Nodes[0], k, 2)
	}

	member := c.Nodes[2]
	member.Kill()
	other, err := NewNode(c.Bin, t.TempDir(), member.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	other.GRPC, other.HTTP, other.Raft, other.Gossip = member.GRPC, member.HTTP, member.Raft, member.Gossip
	if err := other.Redial(grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	if err := other.WaitServing(ctx); err != nil {
		t.Fatalf("a node of another cluster at the member's addresses: %v\n%s", err, tail(other.Log(), 20))
	}
	var theirs string
	waitFor(t, ctx, "both sides' refusals", func() error {
		ost, err := other.Admin().Status(ctx, &pb.StatusRequest{})
		if err != nil {
			return err
		}
		theirs = ost.ClusterId
		refusal := fmt.Sprintf("a node of cluster %s; this node is of cluster %s", ours, theirs)
		if !strings.Contains(other.Log(), "refused a peer of another cluster") || !strings.Contains(other.Log(), refusal) {
			return fmt.Errorf("the other cluster's node logged no refusal of %s yet", ours)
		}
		for _, n := range c.Nodes[:2] {
			if strings.Contains(n.Log(), "not calling a peer of another cluster") {
				return nil
			}
		}
		return fmt.Errorf("no member logged the refusal it met")
	})
	if theirs == ours {
		t.Fatalf("the other node joined cluster %s", ours)
	}
	if v := value(scrape(t, other), "floodgate_other_cluster_refusals_total", nil); v < 1 {
		t.Errorf("the other node's floodgate_other_cluster_refusals_total is %v", v)
	}

	// Each cluster is as it was: the other node alone in its own, the
	// member's cluster with its counts, serving strict checks on two of
	// three nodes.
	ost, err := other.Admin().Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ost.ClusterId != theirs || len(ost.Nodes) != 1 {
		t.Fatalf("the other cluster changed: %s with %d nodes", ost.ClusterId, len(ost.Nodes))
	}
	for _, k := range keys {
		if r := allow(other, k, 1); !r.Allowed || r.Remaining != 4 {
			t.Errorf("%s in the other cluster: allowed %v, %d remaining, want 4 (a count of its own)", k, r.Allowed, r.Remaining)
		}
		if r := allow(c.Nodes[1], k, 1); !r.Allowed || r.Remaining != 2 {
			t.Errorf("%s in the member's cluster: allowed %v, %d remaining, want 2 (2 of 5 used before)", k, r.Allowed, r.Remaining)
		}
	}
	if st, err := c.Nodes[0].Admin().Status(ctx, &pb.StatusRequest{}); err != nil || st.ClusterId != ours || len(st.Nodes) != 3 {
		t.Fatalf("the member's cluster changed: %v, %v", st, err)
	}

	// The member back at its addresses is taken again.
	other.Stop()
	if err := member.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatalf("the member back: %v\n%s", err, c.Logs(20))
	}
	for _, k := range keys {
		if r := allow(member, k, 1); !r.Allowed || r.Remaining != 1 {
			t.Errorf("%s at the member back: allowed %v, %d remaining, want 1", k, r.Allowed, r.Remaining)
		}
	}
}
