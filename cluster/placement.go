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
// its other replicas go by rendezvous hashing, bounded in load: a node
// takes no more replicas than its even share (rounded up) while another
// ranked for the group has room, so that every node holds and applies
// about as many groups as the others. Plain rendezvous gave one of five
// nodes a replica of every group and another one, and the memory and CPU
// of a pod must be sized for its busiest. Groups are placed in id order,
// which every node follows alike. A group whose home is not active (being
// rehomed or retired) is placed by the same rule among all active nodes
// until the meta leader gives it a new home.
func placeGroups(v *fsm.MetaView, active []string, p *placement) {
	var groups []fsm.GroupInfo
	for _, g := range v.Groups {
		if int(g.ID) < len(p.shards) {
			groups = append(groups, g)
		}
	}
	if len(active) == 0 {
		for _, g := range groups {
			p.shards[g.ID] = keepDead(v, int(g.ID), nil)
		}
		return
	}
	want := min(v.Replicas, len(active))
	share := (len(groups)*want + len(active) - 1) / len(active)
	load := make(map[string]int, len(active))
	for _, g := range groups {
		if slices.Contains(active, g.Home) {
			load[g.Home]++
		}
	}
	placed := make([][]string, len(groups))
	ranks := make([][]string, len(groups))
	for i, g := range groups {
		if slices.Contains(active, g.Home) {
			placed[i] = []string{g.Home}
			others := slices.DeleteFunc(slices.Clone(active), func(id string) bool { return id == g.Home })
			ranks[i] = hashing.Rendezvous(int(g.ID), others, len(others))
		} else {
			ranks[i] = hashing.Rendezvous(int(g.ID), active, len(active))
		}
		// Nodes with room first, in rank order; then, when the groups
		// placed before took every one with room, the rest in rank order.
		for _, full := range []bool{false, true} {
			for _, id := range ranks[i] {
				if len(placed[i]) < want && (full || load[id] < share) && !slices.Contains(placed[i], id) {
					placed[i] = append(placed[i], id)
					load[id]++
				}
			}
		}
	}
	rebalance(groups, placed, ranks, load, share, active)
	for i, g := range groups {
		p.shards[g.ID] = keepDead(v, int(g.ID), placed[i])
	}
}

// rebalance moves replicas the greedy pass put past a node's share (the
// last groups placed found the nodes with room already in them) to nodes
// under it: for each node over, in id order, a group it holds but does
// not lead, in id order, takes instead the best-ranked node under its
// share that it lacks. A node's home groups stay.
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
