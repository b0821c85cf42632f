package cluster

import (
	"slices"
	"testing"

	"github.com/floodgate/floodgate/cluster/slots"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// slottedView is a cluster of slots over nodes n1..nodes, one group homed
// on each, with the table given.
func slottedView(nodes int, table []uint32, moves ...fsm.SlotMove) *fsm.MetaView {
	v := &fsm.MetaView{ClusterID: "c", SlotCount: len(table), Shards: len(table), Replicas: 3, GroupsPerNode: 1,
		Table: table, Moves: moves, NextGroup: uint32(nodes), NextMove: uint64(len(moves) + 1)}
	for i := range nodes {
		id := string(rune('1' + i))
		v.Nodes = append(v.Nodes, &metav1.Node{Id: "n" + id, State: metav1.NodeState_NODE_STATE_ACTIVE})
		v.Groups = append(v.Groups, fsm.GroupInfo{ID: uint32(i), Home: "n" + id})
	}
	return v
}

// Between two batches of moves nothing is in flight, yet the cluster is
// not balanced: slotsToMove tells the two apart (a readiness check that
// read only the moves in flight let a test start mid-rebalance).
func TestSlotsToMove(t *testing.T) {
	all0 := make([]uint32, 96)
	even := make([]uint32, 96)
	for s := range even {
		even[s] = uint32(s % 3)
	}
	half := make([]uint32, 96)
	for s := range half {
		half[s] = uint32(s % 3)
		if s >= 48 {
			half[s] = 0
		}
	}
	var planned []uint32
	for s := range 64 {
		planned = append(planned, uint32(s))
	}
	for _, tc := range []struct {
		name string
		v    *fsm.MetaView
		want int
	}{
		{"legacy cluster", &fsm.MetaView{ClusterID: "c", Shards: 8}, 0},
		{"one node owns all", slottedView(1, all0), 0},
		{"two nodes joined, nothing moved", slottedView(3, all0), 64},
		{"balanced", slottedView(3, even), 0},
		{"half moved, none in flight", slottedView(3, half), 32},
		{"the rest in flight", slottedView(3, all0,
			fsm.SlotMove{ID: 1, From: 0, To: 1, Slots: planned[:32], State: fsm.MovePlanned},
			fsm.SlotMove{ID: 2, From: 0, To: 2, Slots: planned[32:], State: fsm.MovePlanned}), 0},
		{"part in flight", slottedView(3, all0,
			fsm.SlotMove{ID: 1, From: 0, To: 1, Slots: planned[:32], State: fsm.MovePlanned}), 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := slotsToMove(tc.v); got != tc.want {
				t.Fatalf("slotsToMove = %d, want %d", got, tc.want)
			}
		})
	}
}

// A group no leader ever reported is unborn to the group planner, which
// then never homes it elsewhere: its home may have started it, and a new
// home would start a second copy of it.
func TestSlotInputMarksGroupsThatNeverReported(t *testing.T) {
	v := slottedView(3, make([]uint32, 12))
	v.Reports = []*metav1.ShardReport{{Shard: 0, Leader: "n1", Term: 2}, nil}
	_, states, _ := slotInput(v, nil)
	for i, want := range []bool{false, true, true} {
		if states[i].Unborn != want {
			t.Errorf("group %d: Unborn = %v, want %v (reports %v)", states[i].ID, states[i].Unborn, want, v.Reports)
		}
	}
	// Its home dead before it reported: removed, not rehomed to n4.
	v.Nodes[2].State = metav1.NodeState_NODE_STATE_DEAD
	v.Nodes = append(v.Nodes, &metav1.Node{Id: "n4", State: metav1.NodeState_NODE_STATE_ACTIVE})
	members, states, _ := slotInput(v, nil)
	got := slots.PlanGroups(members, states, v.GroupsPerNode)
	want := []slots.GroupAction{{Kind: slots.Add, Home: "n4"}, {Kind: slots.Remove, Group: 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("plan %v, want %v", got, want)
	}
}

// Status computes slotsToMove on every call (the SDK polls it to route).
func BenchmarkSlotsToMove(b *testing.B) {
	table := make([]uint32, 1024)
	v := slottedView(5, table)
	for b.Loop() {
		slotsToMove(v)
	}
}

// A group is ready to take slots only once it has its voters: a new group
// starts as its home alone and adds the others one at a time, and slots
// moved into it before they vote held their counts on one node (with it
// dead, no leader could ever serve them or move them out).
func TestAGroupTakesSlotsOnlyWithItsVoters(t *testing.T) {
	table := make([]uint32, 12)
	for s := range table {
		table[s] = uint32(s % 3)
	}
	v := slottedView(4, table) // n1..n4, group 3 new at n4
	full := []*metav1.Replica{{NodeId: "n1", Voter: true}, {NodeId: "n2", Voter: true}, {NodeId: "n3", Voter: true}}
	v.Reports = []*metav1.ShardReport{
		{Shard: 0, Leader: "n1", Term: 2, Ready: true, Replicas: full},
		{Shard: 1, Leader: "n2", Term: 2, Ready: true, Replicas: full},
		{Shard: 2, Leader: "n3", Term: 2, Ready: true, Replicas: full},
		nil,
	}
	n := &Node{cfg: Config{NodeID: "n4"}} // the reports' leader n4 is local: no gossip asked
	for _, tc := range []struct {
		name     string
		replicas []*metav1.Replica
		ready    bool
	}{
		{"its home alone", []*metav1.Replica{{NodeId: "n4", Voter: true}}, false},
		{"two voters and a non-voter", []*metav1.Replica{{NodeId: "n4", Voter: true}, {NodeId: "n1", Voter: true}, {NodeId: "n2"}}, false},
		{"three voters", []*metav1.Replica{{NodeId: "n4", Voter: true}, {NodeId: "n1", Voter: true}, {NodeId: "n2", Voter: true}}, true},
	} {
		v.Reports[3] = &metav1.ShardReport{Shard: 3, Leader: "n4", Term: 2, Ready: true, Replicas: tc.replicas}
		ready := []bool{true, true, true, n.groupReady(v, 3)}
		if ready[3] != tc.ready {
			t.Errorf("%s: ready %v, want %v", tc.name, ready[3], tc.ready)
		}
		_, _, c := slotInput(v, ready)
		plan, err := slots.Plan(c)
		if err != nil {
			t.Fatal(err)
		}
		into := 0
		for _, mv := range slots.NextBatch(c, plan, slots.Limits{}) {
			if mv.To == 3 {
				into += len(mv.Slots)
			}
		}
		if (into > 0) != tc.ready {
			t.Errorf("%s: %d slots planned into group 3", tc.name, into)
		}
	}
	// One node: its groups need no other voter.
	one := slottedView(1, make([]uint32, 4))
	one.Reports = []*metav1.ShardReport{{Shard: 0, Leader: "n1", Term: 1, Ready: true, Replicas: []*metav1.Replica{{NodeId: "n1", Voter: true}}}}
	if !(&Node{cfg: Config{NodeID: "n1"}}).groupReady(one, 0) {
		t.Error("the only node's group, its only voter: not ready")
	}
}
