package cluster

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

func TestNextPause(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		prev, base time.Duration
		rest       bool
		want       time.Duration
	}{
		{250 * ms, 250 * ms, true, 500 * ms},
		{500 * ms, 250 * ms, true, time.Second},
		{time.Second, 250 * ms, true, restPause},
		{restPause, 250 * ms, true, restPause},
		{restPause, 250 * ms, false, 250 * ms},                    // anything to do: at once back to the base
		{5 * time.Second, 5 * time.Second, true, 5 * time.Second}, // a longer base stays
	} {
		if got := nextPause(c.prev, c.base, c.rest); got != c.want {
			t.Errorf("nextPause(%s, %s, %v) = %s, want %s", c.prev, c.base, c.rest, got, c.want)
		}
	}
}

// restingView is a balanced cluster of three nodes, each group led by its
// home with the placed replicas, all voters.
func restingView() (*fsm.MetaView, *placement) {
	table := make([]uint32, 96)
	for s := range table {
		table[s] = uint32(s % 3)
	}
	v := slottedView(3, table)
	v.Reports = make([]*metav1.ShardReport, 3) // placementOf places a group per report slot
	pl := placementOf(v)
	for g, want := range pl.shards {
		rep := &metav1.ShardReport{Shard: uint32(g), Leader: want[0], Term: 2, Ready: true}
		for _, id := range want {
			rep.Replicas = append(rep.Replicas, &metav1.Replica{NodeId: id, Voter: true})
		}
		v.Reports[g] = rep
	}
	return v, pl
}

func TestAtRest(t *testing.T) {
	if v, pl := restingView(); !atRest(v, pl, 0) {
		t.Fatal("a balanced cluster led by its homes is not at rest")
	}
	for _, c := range []struct {
		name   string
		change func(v *fsm.MetaView)
		toMove int
	}{
		{"slots still to move", func(*fsm.MetaView) {}, 7},
		{"a move in flight", func(v *fsm.MetaView) { v.Moves = []fsm.SlotMove{{ID: 1}} }, 0},
		{"a leaving node", func(v *fsm.MetaView) {
			v.Nodes[1] = &metav1.Node{Id: v.Nodes[1].Id, State: metav1.NodeState_NODE_STATE_LEAVING}
		}, 0},
		{"a dead node", func(v *fsm.MetaView) {
			v.Nodes[2] = &metav1.Node{Id: v.Nodes[2].Id, State: metav1.NodeState_NODE_STATE_DEAD}
		}, 0},
		{"a group led by another than its home", func(v *fsm.MetaView) { v.Reports[0].Leader = v.Reports[0].Replicas[1].NodeId }, 0},
		{"a replica not yet a voter", func(v *fsm.MetaView) { v.Reports[1].Replicas[2].Voter = false }, 0},
		{"a replica missing", func(v *fsm.MetaView) { v.Reports[2].Replicas = v.Reports[2].Replicas[:2] }, 0},
		{"a replica where none is placed", func(v *fsm.MetaView) {
			v.Reports[2].Replicas[2] = &metav1.Replica{NodeId: "n9", Voter: true}
		}, 0},
		{"a group that never reported", func(v *fsm.MetaView) { v.Reports[1] = nil }, 0},
		{"an empty cluster", func(v *fsm.MetaView) { v.ClusterID = "" }, 0},
	} {
		v, _ := restingView()
		c.change(v)
		if atRest(v, placementOf(v), c.toMove) {
			t.Errorf("%s: at rest", c.name)
		}
	}
	// A removed group owns no slot and is placed nowhere: its last report
	// does not keep the cluster busy.
	v, _ := restingView()
	v.Reports = append(v.Reports, &metav1.ShardReport{Shard: 3, Leader: "n1", Term: 1})
	v.NextGroup = 4
	if !atRest(v, placementOf(v), 0) {
		t.Error("a removed group's old report keeps the cluster busy")
	}
}
