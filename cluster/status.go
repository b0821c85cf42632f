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
}

// Status reports membership, health and every shard's replicas and leader.
func (n *Node) Status() Status {
	v := n.View()
	st := Status{ClusterID: v.ClusterID, NodeID: n.cfg.NodeID, Shards: v.Shards, Replicas: v.Replicas}
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
	for s := 0; s < v.Shards; s++ {
		ss := ShardStatus{ID: s, Desired: pl.shards[s]}
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
