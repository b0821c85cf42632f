package cluster

import (
	"github.com/hashicorp/raft"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// Status is the cluster as this node sees it.
type Status struct {
	ClusterID  string
	NodeID     string
	Shards     int
	Replicas   int
	MetaLeader string
	Nodes      []NodeStatus
	ShardInfo  []ShardStatus
	// A cluster of slots: the slot count (0 in a legacy cluster), each
	// slot's group, the table's epoch, the moves in flight and the slots
	// still to move beyond them (0 once balanced).
	Slots  int
	Table  []uint32
	Epoch  uint64
	Moves  int
	ToMove int
}

// NodeStatus is one member.
type NodeStatus struct {
	Node      *metav1.Node
	Health    string
	MetaVoter bool
	Replicas  int
	Leaders   int
}

// ShardStatus is one shard: its placement and its leader's last report.
type ShardStatus struct {
	ID       int
	Desired  []string
	Replicas []*metav1.Replica
	Leader   string
	Term     uint64
	// A cluster of slots: slots owned, home node, being drained.
	Slots    int
	Home     string
	Retiring bool
}

// Status reports membership, health and every shard's replicas and leader.
func (n *Node) Status() Status {
	v := n.View()
	st := Status{ClusterID: v.ClusterID, NodeID: n.cfg.NodeID, Shards: v.Shards, Replicas: v.Replicas,
		Slots: v.SlotCount, Table: v.Table, Epoch: v.Epoch, Moves: len(v.Moves), ToMove: n.slotsToMove(v)}
	voters := map[string]bool{}
	if meta := n.metaGroup(); meta != nil {
		st.MetaLeader = meta.leader()
		if cfg, err := meta.configuration(); err == nil {
			for _, s := range cfg.Servers {
				voters[string(s.ID)] = s.Suffrage == raft.Voter
			}
		}
	}
	replicas, leaders := map[string]int{}, map[string]int{}
	pl := placementOf(v)
	owned := map[uint32]int{}
	for _, g := range v.Table {
		owned[g]++
	}
	for _, id := range v.GroupIDs() {
		s := int(id)
		ss := ShardStatus{ID: s, Desired: pl.shards[s], Slots: owned[id]}
		if g := v.Group(id); g != nil {
			ss.Home, ss.Retiring = g.Home, g.Retiring
		}
		if rep := v.Reports[s]; rep != nil {
			ss.Replicas, ss.Leader, ss.Term = rep.Replicas, rep.Leader, rep.Term
			for _, r := range rep.Replicas {
				replicas[r.NodeId]++
			}
			leaders[rep.Leader]++
		}
		st.ShardInfo = append(st.ShardInfo, ss)
	}
	for _, m := range v.Nodes {
		ns := NodeStatus{Node: m, MetaVoter: voters[m.Id], Replicas: replicas[m.Id], Leaders: leaders[m.Id]}
		if m.Id == n.cfg.NodeID {
			ns.Health = HealthAlive
		} else {
			ns.Health, _ = n.gossip.health(m.Id)
		}
		st.Nodes = append(st.Nodes, ns)
	}
	return st
}
