package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

func TestThreeNodesSettle(t *testing.T) {
	nodes := cluster3(t)
	waitSettled(t, nodes, 10*time.Second)
	st, err := nodes[1].admin().Status(context.Background(), &pb.StatusRequest{})
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
}

func TestJoinFreshNodeByAdmin(t *testing.T) {
	n1 := start(t, nodeConfig(t, "n1"))
	n2 := start(t, nodeConfig(t, "n2")) // a cluster of its own
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := n1.admin().Join(ctx, &pb.JoinRequest{NodeAddr: n2.cfg.GRPCAddr})
	if err != nil {
		t.Fatal(err)
	}
	if resp.NodeId != "n2" || resp.ClusterId != n1.node.View().ClusterID {
		t.Fatalf("join answered %v", resp)
	}
	waitSettled(t, []*testNode{n1, n2}, 30*time.Second)
	// Joined once, n2 is no longer fresh: it cannot be pulled elsewhere.
	n3 := start(t, nodeConfig(t, "n3"))
	if _, err := n3.admin().Join(ctx, &pb.JoinRequest{NodeAddr: n2.cfg.GRPCAddr}); err == nil {
		t.Fatal("joined a member of another cluster")
	}
}

func TestLeaveDrainsAndRemoves(t *testing.T) {
	nodes := cluster3(t)
	cfg := nodeConfig(t, "n4")
	cfg.Join = []string{nodes[0].cfg.GRPCAddr}
	n4 := start(t, cfg)
	nodes = append(nodes, n4)
	waitSettled(t, nodes, 30*time.Second)
	if _, err := nodes[0].admin().Leave(context.Background(), &pb.LeaveRequest{NodeId: "n2"}); err != nil {
		t.Fatal(err)
	}
	left := nodes[1]
	select {
	case <-left.node.Left():
	case <-time.After(30 * time.Second):
		t.Fatal("n2 was not removed")
	}
	rest := []*testNode{nodes[0], nodes[2], nodes[3]}
	waitSettled(t, rest, 30*time.Second)
	st, err := nodes[0].admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.Id == "n2" {
			t.Fatalf("n2 still listed: %v", n)
		}
	}
}

func TestRestartsKeepMembership(t *testing.T) {
	nodes := cluster3(t)
	nodes[1].restart()
	waitSettled(t, nodes, 30*time.Second)
	restartAll(t, nodes...)
	waitSettled(t, nodes, 30*time.Second)
	st, err := nodes[2].admin().Status(context.Background(), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(len(st.Nodes)); got != "3" {
		t.Fatalf("%s nodes after a full restart", got)
	}
}
