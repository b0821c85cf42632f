package cluster

import (
	"slices"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// placement is where every group should live: for each group (a shard of
// a legacy cluster), the nodes that should hold a replica, preferred leader
// first; nil for a group removed. It is a pure function
// of the meta state, so every node computes the same one.
type placement struct {
	shards [][]string
}

// placementOf places every shard of v on its active nodes, with
// min(replicas, active nodes) replicas each. Leaving and dead nodes get
// nothing, so their replicas move away.
func placementOf(v *fsm.MetaView) *placement {
	var active []string
	for _, m := range v.Nodes {
		if m.State == metav1.NodeState_NODE_STATE_ACTIVE {
			active = append(active, m.Id)
		}
	}
	p := &placement{shards: make([][]string, len(v.Reports))}
	if !v.Slotted() {
		for s := range p.shards {
			p.shards[s] = keepDead(v, s, hashing.Rendezvous(s, active, v.Replicas))
		}
		return p
	}
	placeGroups(v, active, p)
	return p
}

// placeGroups places a cluster of slots' groups. A group's home leads it;
// its other replicas go by rendezvous hashing, then the nodes past their
// even share of replicas (rounded up) give replicas to nodes under it
// (rebalance), so that every node holds and applies about as many groups
// as the others: plain rendezvous gave one of five nodes a replica of
// every group and another one, and a pod's memory and CPU must be sized
// for the busiest. The moves that keep the balance ripple a little
// through the groups: a join or a death copies up to about twice the
// replicas plain rendezvous did (TestPlacementMovesLittle), once, where
// the imbalance was for good. So that passing states ripple less:
//   - an active node that leads no group yet (one that just joined: its
//     group comes in the meta leader's next step) is ranked after those
//     that do;
//   - groups whose home is not active (being rehomed or retired) are
//     placed after the others, among all active nodes, within the share
//     of all groups, and moved alone to keep it: their coming and going
//     moves no other group.
func placeGroups(v *fsm.MetaView, active []string, p *placement) {
	var homed, unhomed []fsm.GroupInfo
	for _, g := range v.Groups {
		switch {
		case int(g.ID) >= len(p.shards):
		case slices.Contains(active, g.Home):
			homed = append(homed, g)
		default:
			unhomed = append(unhomed, g)
		}
	}
	if len(active) == 0 {
		for _, g := range unhomed {
			p.shards[g.ID] = keepDead(v, int(g.ID), nil)
		}
		return
	}
	want := min(v.Replicas, len(active))
	load := make(map[string]int, len(active))
	var leaders, idle []string // active nodes home to a group, and the others
	for _, id := range active {
		if slices.ContainsFunc(homed, func(g fsm.GroupInfo) bool { return g.Home == id }) {
			leaders = append(leaders, id)
		} else {
			idle = append(idle, id)
		}
	}
	for _, g := range homed {
		load[g.Home]++
	}
	shareOf := func(groups int) int { return (groups*want + len(active) - 1) / len(active) }
	for _, phase := range []struct {
		groups []fsm.GroupInfo
		share  int
		led    bool
	}{{homed, shareOf(len(homed)), true}, {unhomed, shareOf(len(homed) + len(unhomed)), false}} {
		placed := make([][]string, len(phase.groups))
		ranks := make([][]string, len(phase.groups))
		for i, g := range phase.groups {
			if phase.led {
				placed[i] = []string{g.Home}
			}
			ranks[i] = slices.Concat(ranked(int(g.ID), leaders, g.Home), ranked(int(g.ID), idle, g.Home))
			for _, id := range ranks[i] {
				if len(placed[i]) < want {
					placed[i] = append(placed[i], id)
					load[id]++
				}
			}
		}
		rebalance(phase.groups, placed, ranks, load, phase.share, active)
		for i, g := range phase.groups {
			p.shards[g.ID] = keepDead(v, int(g.ID), placed[i])
		}
	}
}

// ranked is nodes but home ranked for group by rendezvous hashing.
func ranked(group int, nodes []string, home string) []string {
	others := slices.DeleteFunc(slices.Clone(nodes), func(id string) bool { return id == home })
	return hashing.Rendezvous(group, others, len(others))
}

// rebalance moves the replicas rendezvous put past a node's share to
// nodes under it: for each node over, in id order, one of groups it holds
// but does not lead, in id order, takes instead the best-ranked node
// under its share that it lacks.
func rebalance(groups []fsm.GroupInfo, placed, ranks [][]string, load map[string]int, share int, active []string) {
	for _, over := range active {
		for i := 0; i < len(groups) && load[over] > share; i++ {
			at := slices.Index(placed[i], over)
			if at < 0 || groups[i].Home == over {
				continue
			}
			for _, id := range ranks[i] {
				if load[id] < share && !slices.Contains(placed[i], id) {
					placed[i][at] = id
					load[over]--
					load[id]++
					break
				}
			}
		}
	}
}

// keepDead keeps in a group's placement one dead node that its last
// report lists as a replica, when the active nodes placed are too few to
// fill it and even in number: a dead voter then costs the group no
// tolerance (two of three, like two of two, survive no other failure),
// and the group is whole again as soon as the node returns. Dropped, a
// group of three would be two of two until the node had been added back
// and caught up, and a failure in that time would stop a group that it
// and the survivor could have served. Beside an odd number of active
// nodes a dead voter would raise the quorum, so none is kept; nor is a
// leaving node, and nobody gets a replica it does not hold (planShard
// adds only live nodes).
func keepDead(v *fsm.MetaView, group int, placed []string) []string {
	if len(placed) == 0 || len(placed)%2 == 1 || len(placed) >= v.Replicas || group >= len(v.Reports) || v.Reports[group] == nil {
		return placed
	}
	for _, r := range v.Reports[group].Replicas {
		if m := v.Node(r.NodeId); m != nil && m.State == metav1.NodeState_NODE_STATE_DEAD && !slices.Contains(placed, r.NodeId) {
			return append(placed, r.NodeId)
		}
	}
	return placed
}

// reportHas reports whether id is among replicas.
func reportHas(replicas []*metav1.Replica, id string) bool {
	for _, r := range replicas {
		if r.NodeId == id {
			return true
		}
	}
	return false
}
