package rpc_test

import (
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/test/inproc"
)

// A member of one cluster restarted on its data dir with --join addresses
// of another cluster is refused at start, saying so, and the other cluster
// never lists it. Before, its announce was taken as a member's new
// addresses: the other cluster added it (a new group homed on it, its
// replicas placed there, rebalancing that never ended), sent its meta log
// into the node's Raft groups, and the node, reading that log, stopped as
// "removed". Found starting, by hand, a node of a two-node cluster with
// --join pointing at a third node's cluster.
func TestResumeRefusesJoinOfAnotherCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("two in-process clusters")
	}
	a := inproc.SlotCluster(t, 1, 32)[0]
	b := inproc.SlotCluster(t, 2, 32)
	if a.Node.View().ClusterID == b[0].Node.View().ClusterID {
		t.Fatal("two clusters with one id")
	}
	// b's second member, on its data dir, now pointed at a.
	moved := b[1]
	moved.Stop()
	cfg := moved.Cfg
	cfg.Join = []string{a.Cfg.GRPCAddr}
	n, err := inproc.TryStart(t, cfg)
	if err == nil {
		n.Stop()
		t.Error("a member of another cluster started with --join of this one")
	} else if !strings.Contains(err.Error(), "belongs to cluster "+a.Node.View().ClusterID) {
		t.Errorf("start: %v; want it to name the other cluster", err)
	}
	// Whatever the start said, the cluster at a must not have taken it.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if m := a.Node.View().Node(cfg.NodeID); m != nil {
			t.Fatalf("cluster %s lists %s, a member of cluster %s", a.Node.View().ClusterID, cfg.NodeID, b[0].Node.View().ClusterID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// One stale --join address (a reused IP, now another cluster's) beside a
// member of the node's own cluster does not stop it: it resumes through
// its own cluster, and is never announced to the other.
func TestResumeSkipsAStaleJoinAddressOfAnotherCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("two in-process clusters")
	}
	a := inproc.SlotCluster(t, 1, 32)[0]
	b := inproc.SlotCluster(t, 2, 32)
	moved := b[1]
	moved.Stop()
	cfg := moved.Cfg
	cfg.Join = []string{a.Cfg.GRPCAddr, b[0].Cfg.GRPCAddr}
	n, err := inproc.TryStart(t, cfg)
	if err != nil {
		t.Fatalf("resuming with one address of its own cluster among its --join: %v", err)
	}
	defer n.Stop()
	if got := n.Node.View().ClusterID; got != b[0].Node.View().ClusterID {
		t.Errorf("resumed into cluster %q, want its own, %s", got, b[0].Node.View().ClusterID)
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if m := a.Node.View().Node(cfg.NodeID); m != nil {
			t.Fatalf("cluster %s lists %s, a member of cluster %s", a.Node.View().ClusterID, cfg.NodeID, b[0].Node.View().ClusterID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
