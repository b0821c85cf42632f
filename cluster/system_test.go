package cluster_test

import (
	"context"
	"testing"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

func TestThreeNodesSettle(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	inproc.WaitSettled(t, nodes, 10*time.Second)
	st, err := nodes[1].Admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.State != "active" || n.Health != "alive" || !n.MetaVoter {
			t.Errorf("node %s: state %s, health %s, meta voter %v", n.Id, n.State, n.Health, n.MetaVoter)
		}
		if n.Replicas != 8 {
			t.Errorf("node %s holds %d replicas, want all 8", n.Id, n.Replicas)
		}
	}
	leaders := map[string]int{}
	for _, s := range st.ShardStatus {
		leaders[s.Leader]++
	}
	if len(leaders) < 2 {
		t.Errorf("every shard led by one node: %v (leadership should follow the placement)", leaders)
	}
}

func TestJoinFreshNodeByAdmin(t *testing.T) {
	n1 := inproc.Start(t, inproc.Config(t, "n1"))
	n2 := inproc.Start(t, inproc.Config(t, "n2")) // a cluster of its own
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := n1.Admin().Join(ctx, &pb.JoinRequest{NodeAddr: n2.Cfg.GRPCAddr})
	if err != nil {
		t.Fatal(err)
	}
	if resp.NodeId != "n2" || resp.ClusterId != n1.Node.View().ClusterID {
		t.Fatalf("join answered %v", resp)
	}
	inproc.WaitSettled(t, []*inproc.Node{n1, n2}, 30*time.Second)
	// Joined once, n2 is no longer fresh: it cannot be pulled elsewhere.
	n3 := inproc.Start(t, inproc.Config(t, "n3"))
	if _, err := n3.Admin().Join(ctx, &pb.JoinRequest{NodeAddr: n2.Cfg.GRPCAddr}); err == nil {
		t.Fatal("joined a member of another cluster")
	}
}

func TestLeaveDrainsAndRemoves(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	cfg := inproc.Config(t, "n4")
	cfg.Join = []string{nodes[0].Cfg.GRPCAddr}
	nodes = append(nodes, inproc.Start(t, cfg))
	inproc.WaitSettled(t, nodes, 30*time.Second)
	leave(t, nodes[0], nodes[1])
	rest := []*inproc.Node{nodes[0], nodes[2], nodes[3]}
	inproc.WaitSettled(t, rest, 30*time.Second)
	st, err := nodes[0].Admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.Id == "n2" {
			t.Fatalf("n2 still listed: %v", n)
		}
	}
	// The last active node cannot leave: nothing could take its replicas.
	lone := inproc.Start(t, inproc.Config(t, "lone"))
	if _, err := lone.Admin().Leave(context.Background(), &pb.LeaveRequest{}); err == nil {
		t.Fatal("the only node of a cluster left it")
	}
}

func TestRestartsKeepMembership(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	nodes[1].Restart()
	inproc.WaitSettled(t, nodes, 30*time.Second)
	inproc.RestartAll(t, nodes...)
	inproc.WaitSettled(t, nodes, 30*time.Second)
	st, err := nodes[2].Admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 3 {
		t.Fatalf("%d nodes after a full restart", len(st.Nodes))
	}
}

// A node that left may come back under its old --node-id with an empty data
// dir (the README's way back): it replays the meta log, which lists it, then
// removes it (its leave), before its rejoin lists it again. It must stay
// through that replay, and the cluster settle with it.
func TestRejoinUnderTheSameID(t *testing.T) {
	nodes := inproc.SlotCluster(t, 3, 4096)
	leave(t, nodes[0], nodes[1])
	nodes[1].Stop()
	cfg := inproc.Config(t, "n2") // an empty data dir, new ports
	cfg.Shards, cfg.Slots = 0, 4096
	cfg.Join = []string{nodes[0].Cfg.GRPCAddr}
	back := inproc.Start(t, cfg)
	rest := []*inproc.Node{nodes[0], nodes[2], back}
	inproc.WaitSettled(t, rest, time.Minute)
	select {
	case <-back.Node.Left():
		t.Fatal("the rejoined n2 took its replayed leave for a removal")
	default:
	}
	// A restart replays its whole meta log, both lives included.
	back.Restart()
	inproc.WaitSettled(t, rest, time.Minute)
	select {
	case <-back.Node.Left():
		t.Fatal("the restarted n2 took its replayed leave for a removal")
	default:
	}
	st, err := nodes[0].Admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.Id == "n2" && (n.State != "active" || n.Replicas == 0) {
			t.Fatalf("n2 rejoined as %v", n)
		}
	}
}

// leave drains node through by's Admin API and waits until node knows it
// was removed (Left), as the process exits on it. A node taken out of the
// meta group may hold log entries it never hears committed: it must know
// itself removed all the same.
func leave(t *testing.T, by, node *inproc.Node) {
	t.Helper()
	if _, err := by.Admin().Leave(context.Background(), &pb.LeaveRequest{NodeId: node.ID}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-node.Node.Left():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s was not removed", node.ID)
	}
}
