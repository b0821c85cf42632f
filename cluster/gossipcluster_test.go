package cluster_test

import (
	"testing"
	"time"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

// A node of another cluster at a dead member's old gossip address (an IP
// reused, as pods' are; both clusters with the same --gossip-key, or
// none) is not taken for the member. The cluster keeps asking that address
// to gossip (rejoinGossip), and memberlist, which knows no clusters,
// merged the two pools: the other cluster's node of the same name (pods
// of two StatefulSets share their names) read as the dead member back,
// which was marked active again and given replicas. Its data dir's
// incarnation, gossiped, tells it apart.
func TestGossipKeepsOtherClustersOut(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	n1, n3 := nodes[0], nodes[2]
	n3.Stop()
	inproc.Eventually(t, time.Minute, "n3 marked dead", func() error {
		if m := n1.Node.View().Node("n3"); m == nil || m.State != metav1.NodeState_NODE_STATE_DEAD {
			return errString("n3 not dead yet")
		}
		return nil
	})
	other := inproc.Config(t, "n3")
	other.GossipAddr = n3.Cfg.GossipAddr
	inproc.Start(t, other) // a cluster of its own, at n3's old gossip address
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		if m := n1.Node.View().Node("n3"); m == nil || m.State != metav1.NodeState_NODE_STATE_DEAD {
			t.Fatalf("another cluster's n3 was taken for this one's: %v", m)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
