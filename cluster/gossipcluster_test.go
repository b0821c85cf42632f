package cluster_test

import (
	"context"
	"net"
	"testing"
	"time"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
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

// A dead member whose gossip address takes connections and never answers
// (or swallows them: a machine gone, an address reused) holds up nothing.
// The reconcile loop asked it to gossip again in line (rejoinGossip), and
// memberlist waits its TCP timeout, 10 s, for each address: every pass,
// and with it the dead marking, shard reports, slot moves and leadership
// hand-offs, waited that long.
func TestASilentDeadMemberDoesNotHoldUpTheReconciler(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	n1, n3 := nodes[0], nodes[2]
	n3.Stop()
	ln, err := net.Listen("tcp", n3.Cfg.GossipAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn // accepted, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	var gone time.Time
	inproc.Eventually(t, time.Minute, "n3 dead to gossip", func() error {
		if h := status(t, n1, "n3").Health; h != "dead" && h != "unknown" {
			return errString("n3 " + h)
		}
		gone = time.Now()
		return nil
	})
	inproc.Eventually(t, time.Minute, "n3 marked dead", func() error {
		if m := n1.Node.View().Node("n3"); m == nil || m.State != metav1.NodeState_NODE_STATE_DEAD {
			return errString("n3 not dead yet")
		}
		return nil
	})
	// --dead-after (3 s) after gossip's verdict, and a pass or two; a
	// pass held by the join took 10 s.
	if took := time.Since(gone); took > 3*time.Second+4*time.Second {
		t.Fatalf("n3 marked dead %s after gossip found it dead, --dead-after 3s", took.Round(100*time.Millisecond))
	}
}

// status is node's status line for member id, as n reports it.
func status(t *testing.T, n *inproc.Node, id string) *pb.NodeStatus {
	t.Helper()
	st, err := n.Admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Nodes {
		if m.Id == id {
			return m
		}
	}
	t.Fatalf("%s not listed", id)
	return nil
}
