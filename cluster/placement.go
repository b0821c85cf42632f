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

// placementOf places every shard of v on its active nodes by rendezvous
// hashing, with min(replicas, active nodes) replicas each. Leaving and dead
// nodes get nothing, so their replicas move away.
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
	// A group's home leads it; the other replicas go by rendezvous. A
	// group whose home is not active (being rehomed or retired) is placed
	// by rendezvous alone until the meta leader gives it a new home.
	for _, g := range v.Groups {
		if int(g.ID) >= len(p.shards) {
			continue
		}
		if !slices.Contains(active, g.Home) {
			p.shards[g.ID] = keepDead(v, int(g.ID), hashing.Rendezvous(int(g.ID), active, v.Replicas))
			continue
		}
		others := slices.DeleteFunc(slices.Clone(active), func(id string) bool { return id == g.Home })
		p.shards[g.ID] = keepDead(v, int(g.ID), append([]string{g.Home}, hashing.Rendezvous(int(g.ID), others, v.Replicas-1)...))
	}
	return p
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
