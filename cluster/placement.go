package cluster

import (
	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// placement is where every shard should live: for each shard, the nodes
// that should hold a replica, preferred leader first. It is a pure function
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
	p := &placement{shards: make([][]string, v.Shards)}
	for s := range p.shards {
		p.shards[s] = hashing.Rendezvous(s, active, v.Replicas)
	}
	return p
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
