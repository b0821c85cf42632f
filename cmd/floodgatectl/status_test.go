package main

import (
	"testing"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// The status header says "balanced" only when nothing is left: no move in
// flight or still to start, no active node waiting for its group (the
// seconds after a join, when no move is planned yet), no group draining.
func TestRebalancing(t *testing.T) {
	nodes := func(ids ...string) []*pb.NodeStatus {
		var out []*pb.NodeStatus
		for _, id := range ids {
			out = append(out, &pb.NodeStatus{Id: id, State: "active"})
		}
		return out
	}
	groups := []*pb.ShardStatus{{Id: 0, Home: "n1"}, {Id: 1, Home: "n2"}}
	for _, tc := range []struct {
		name string
		st   *pb.StatusResponse
		want string
	}{
		{"balanced", &pb.StatusResponse{Nodes: nodes("n1", "n2"), ShardStatus: groups}, "balanced"},
		{"a node just joined", &pb.StatusResponse{Nodes: nodes("n1", "n2", "n3"), ShardStatus: groups},
			"rebalancing: 1 node without a group yet"},
		{"a leaving node needs no group", &pb.StatusResponse{Nodes: append(nodes("n1", "n2"), &pb.NodeStatus{Id: "n3", State: "leaving"}), ShardStatus: groups},
			"balanced"},
		{"moves", &pb.StatusResponse{Nodes: nodes("n1", "n2"), ShardStatus: groups, Moves: 2, SlotsToMove: 1},
			"rebalancing: 2 slot moves in flight, 1 slot still to move"},
		{"a group draining", &pb.StatusResponse{Nodes: nodes("n1"), ShardStatus: []*pb.ShardStatus{{Id: 0, Home: "n1"}, {Id: 1, Home: "n1", Retiring: true}},
			Moves: 1, SlotsToMove: 300}, "rebalancing: 1 slot move in flight, 300 slots still to move, 1 group draining"},
	} {
		if got := rebalancing(tc.st); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A group is placed on min(replicas, active nodes) (cluster.placementOf):
// the header must not promise three copies on two nodes.
func TestReplicasEach(t *testing.T) {
	for _, tc := range []struct {
		states []string
		want   string
	}{
		{[]string{"active", "active", "active"}, "3 replicas each"},
		{[]string{"active", "active", "active", "active"}, "3 replicas each"},
		{[]string{"active", "active"}, "2 of 3 replicas each (2 active nodes)"},
		{[]string{"active", "dead", "active"}, "2 of 3 replicas each (2 active nodes)"},
		{[]string{"active", "leaving", "leaving"}, "1 of 3 replicas each (1 active node)"},
	} {
		st := &pb.StatusResponse{Replicas: 3}
		for i, s := range tc.states {
			st.Nodes = append(st.Nodes, &pb.NodeStatus{Id: string(rune('a' + i)), State: s})
		}
		if got := replicasEach(st); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.states, got, tc.want)
		}
	}
}
