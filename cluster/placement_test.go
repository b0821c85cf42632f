package cluster

import (
	"fmt"
	"slices"
	"testing"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// homedView is a cluster of slots of nodes n1..nN, each home to perNode
// groups (ids in join order), with replicas replicas a group.
func homedView(nodes, perNode, replicas int) *fsm.MetaView {
	v := &fsm.MetaView{SlotCount: 4096, Shards: 4096, Replicas: replicas, GroupsPerNode: perNode}
	for i := 1; i <= nodes; i++ {
		id := fmt.Sprintf("n%d", i)
		v.Nodes = append(v.Nodes, &metav1.Node{Id: id, State: metav1.NodeState_NODE_STATE_ACTIVE})
		for range perNode {
			v.Groups = append(v.Groups, fsm.GroupInfo{ID: uint32(len(v.Groups)), Home: id})
		}
	}
	v.NextGroup = uint32(len(v.Groups))
	v.Reports = make([]*metav1.ShardReport, len(v.Groups))
	return v
}

// Every group gets its home first and min(replicas, nodes) distinct
// active nodes, and no node holds more than its even share of replicas,
// rounded up: plain rendezvous gave one of five nodes a replica of every
// group, so a pod sized for three replicas held five.
func TestPlacementIsBalanced(t *testing.T) {
	for nodes := 1; nodes <= 9; nodes++ {
		for perNode := 1; perNode <= 3; perNode++ {
			for _, replicas := range []int{1, 3, 5} {
				v := homedView(nodes, perNode, replicas)
				leaving := nodes > 3 && perNode == 2 // the last node leaving: its groups have no home to lead them
				if leaving {
					v.Nodes[nodes-1].State = metav1.NodeState_NODE_STATE_LEAVING
				}
				active := nodes - len(slices.DeleteFunc(slices.Clone(v.Nodes), func(m *metav1.Node) bool { return m.State == metav1.NodeState_NODE_STATE_ACTIVE }))
				pl := placementOf(v)
				want := min(replicas, active)
				load := map[string]int{}
				for _, g := range v.Groups {
					got := pl.shards[g.ID]
					homed := !leaving || g.Home != v.Nodes[nodes-1].Id
					if len(got) != want || (homed && got[0] != g.Home) || slices.Contains(got, v.Nodes[nodes-1].Id) && leaving ||
						len(slices.Compact(slices.Sorted(slices.Values(got)))) != want {
						t.Fatalf("%d nodes, %d a node, %d replicas: group %d placed on %v (home %s)", nodes, perNode, replicas, g.ID, got, g.Home)
					}
					for _, id := range got {
						load[id]++
					}
				}
				share := (len(v.Groups)*want + active - 1) / active
				for id, n := range load {
					if n > share {
						t.Errorf("%d nodes, %d a node, %d replicas: %s holds %d replicas, share %d", nodes, perNode, replicas, id, n, share)
					}
				}
				if again := placementOf(v); !slices.EqualFunc(again.shards, pl.shards, slices.Equal) {
					t.Fatalf("two placements of one view differ")
				}
			}
		}
	}
}

// namedView is homedView with the nodes named by name(i), i from 0.
func namedView(nodes, perNode, replicas int, name func(int) string) *fsm.MetaView {
	v := homedView(nodes, perNode, replicas)
	for i, m := range v.Nodes {
		m.Id = name(i)
	}
	for i := range v.Groups {
		v.Groups[i].Home = name(i / perNode)
	}
	return v
}

// plainOf is the placement before the bound: home, then rendezvous.
func plainOf(v *fsm.MetaView) [][]string {
	var active []string
	for _, m := range v.Nodes {
		if m.State == metav1.NodeState_NODE_STATE_ACTIVE {
			active = append(active, m.Id)
		}
	}
	out := make([][]string, len(v.Reports))
	for _, g := range v.Groups {
		if slices.Contains(active, g.Home) {
			out[g.ID] = append([]string{g.Home}, ranked(int(g.ID), active, g.Home)[:min(v.Replicas, len(active))-1]...)
		} else {
			out[g.ID] = hashing.Rendezvous(int(g.ID), active, v.Replicas)
		}
	}
	return out
}

// added counts the replicas views after the first place that the view
// before did not: what the cluster copies going through them.
func added(views ...[][]string) int {
	n := 0
	for i := 1; i < len(views); i++ {
		for g, now := range views[i] {
			for _, id := range now {
				if g >= len(views[i-1]) || !slices.Contains(views[i-1][g], id) {
					n++
				}
			}
		}
	}
	return n
}

// A join (the node active first, its group added in the meta leader's
// next step) and a death (the dead node's groups left without a home)
// copy at most about twice the replicas plain rendezvous did: the moves
// that keep the balance ripple a little, and the passing states are kept
// out of them. Names as a StatefulSet's and as generated ones.
func TestPlacementMovesLittle(t *testing.T) {
	names := map[string]func(int) string{
		"statefulset": func(i int) string { return fmt.Sprintf("floodgate-%d", i) },
		"generated":   func(i int) string { return fmt.Sprintf("node-%02d", 37*i%101) },
	}
	for kind, name := range names {
		for perNode := 1; perNode <= 2; perNode++ {
			for nodes := 3; nodes <= 8; nodes++ {
				before := namedView(nodes, perNode, 3, name)
				mid := namedView(nodes, perNode, 3, name) // the new node active, no group yet
				mid.Nodes = append(mid.Nodes, &metav1.Node{Id: name(nodes), State: metav1.NodeState_NODE_STATE_ACTIVE})
				after := namedView(nodes+1, perNode, 3, name)
				join := added(placementOf(before).shards, placementOf(mid).shards, placementOf(after).shards)
				plainJoin := added(plainOf(before), plainOf(mid), plainOf(after))
				// A death: the last node of after dead, its groups unhomed.
				dead := namedView(nodes+1, perNode, 3, name)
				dead.Nodes[1].State = metav1.NodeState_NODE_STATE_DEAD
				death := added(placementOf(after).shards, placementOf(dead).shards)
				plainDeath := added(plainOf(after), plainOf(dead))
				if join > 2*plainJoin+3*perNode || death > 2*plainDeath+3*perNode {
					t.Errorf("%s, %d a node, %d → %d nodes: a join copies %d replicas (plain %d), a death %d (plain %d)",
						kind, perNode, nodes, nodes+1, join, plainJoin, death, plainDeath)
				}
				t.Logf("%s, %d a node, %d → %d nodes: a join copies %d replicas (plain %d), a death %d (plain %d)",
					kind, perNode, nodes, nodes+1, join, plainJoin, death, plainDeath)
			}
		}
	}
}
