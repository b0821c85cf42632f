package cluster

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// deadView is a view of nodes n1..nN, those in dead DEAD and those in
// leaving LEAVING, with one group (0) whose report lists held.
func deadView(nodes, replicas int, dead, leaving, held []string) *fsm.MetaView {
	v := &fsm.MetaView{ClusterID: "c", Replicas: replicas, Reports: []*metav1.ShardReport{{Shard: 0, Leader: "n1"}}}
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		st := metav1.NodeState_NODE_STATE_ACTIVE
		switch {
		case slices.Contains(dead, id):
			st = metav1.NodeState_NODE_STATE_DEAD
		case slices.Contains(leaving, id):
			st = metav1.NodeState_NODE_STATE_LEAVING
		}
		v.Nodes = append(v.Nodes, &metav1.Node{Id: id, State: st})
	}
	for _, id := range held {
		v.Reports[0].Replicas = append(v.Reports[0].Replicas, &metav1.Replica{NodeId: id, Voter: true})
	}
	return v
}

// A dead replica is kept where no active node takes its place and the
// active ones are even in number (its vote then costs no tolerance); it
// is never added where it holds none, never beside an odd number, and
// at most one.
func TestKeepDead(t *testing.T) {
	for _, c := range []struct {
		name                string
		nodes, replicas     int
		dead, leaving, held []string
		placed, want        []string
	}{
		{"three, one dead: kept", 3, 3, []string{"n1"}, nil, []string{"n1", "n2", "n3"}, []string{"n2", "n3"}, []string{"n2", "n3", "n1"}},
		{"four, one dead: an active node takes it", 4, 3, []string{"n1"}, nil, []string{"n1", "n2", "n3"}, []string{"n2", "n3", "n4"}, []string{"n2", "n3", "n4"}},
		{"dead, never held: not added", 3, 3, []string{"n1"}, nil, []string{"n2", "n3"}, []string{"n2", "n3"}, []string{"n2", "n3"}},
		{"leaving: not kept", 3, 3, nil, []string{"n1"}, []string{"n1", "n2", "n3"}, []string{"n2", "n3"}, []string{"n2", "n3"}},
		{"five replicas, three active: none beside an odd number", 5, 5, []string{"n1", "n2"}, nil, []string{"n1", "n2", "n3", "n4", "n5"}, []string{"n3", "n4", "n5"}, []string{"n3", "n4", "n5"}},
		{"five replicas, four active: one", 5, 5, []string{"n1"}, nil, []string{"n1", "n2", "n3", "n4", "n5"}, []string{"n2", "n3", "n4", "n5"}, []string{"n2", "n3", "n4", "n5", "n1"}},
		{"three, two dead: none beside one", 3, 3, []string{"n1", "n2"}, nil, []string{"n1", "n2", "n3"}, []string{"n3"}, []string{"n3"}},
		{"no active node: nothing", 3, 3, []string{"n1", "n2", "n3"}, nil, []string{"n1", "n2", "n3"}, nil, nil},
	} {
		v := deadView(c.nodes, c.replicas, c.dead, c.leaving, c.held)
		if got := keepDead(v, 0, slices.Clone(c.placed)); !slices.Equal(got, c.want) {
			t.Errorf("%s: keepDead(%v) = %v, want %v", c.name, c.placed, got, c.want)
		}
	}
	// Through placementOf: three nodes, n1 dead, its replica kept in a
	// group homed elsewhere.
	v := deadView(3, 3, []string{"n1"}, nil, []string{"n2", "n3", "n1"})
	v.Shards = 1
	if got := placementOf(v).shards[0]; len(got) != 3 || !slices.Contains(got, "n1") {
		t.Errorf("placementOf with n1 dead: %v, want n1 kept beside n2 and n3", got)
	}
}

// The meta group keeps one dead voter beside an even number of active
// ones, and demotes it otherwise.
func TestKeepDeadVoter(t *testing.T) {
	for _, c := range []struct {
		name  string
		nodes int
		dead  []string
		want  bool
	}{
		{"three, one dead", 3, []string{"n1"}, true},
		{"four, one dead: three vote without it", 4, []string{"n1"}, false},
		{"five, one dead", 5, []string{"n1"}, true},
		{"five, two dead", 5, []string{"n1", "n2"}, false},
		{"three, two dead", 3, []string{"n1", "n2"}, false},
	} {
		v := deadView(c.nodes, 3, c.dead, nil, nil)
		var cfg raft.Configuration
		active := 0
		for _, m := range v.Nodes {
			cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID(m.Id), Suffrage: raft.Voter})
			if m.State == metav1.NodeState_NODE_STATE_ACTIVE {
				active++
			}
		}
		if got := keepDeadVoter(cfg, v, active); got != c.want {
			t.Errorf("%s: keepDeadVoter = %v, want %v", c.name, got, c.want)
		}
	}
}
