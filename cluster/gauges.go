package cluster

import (
	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/metrics"
)

// Gauges reads what this node holds now, for the metrics endpoint: it
// takes the node's lock once and asks each local replica.
func (n *Node) Gauges() metrics.NodeGauges {
	var g metrics.NodeGauges
	n.mu.RLock()
	reps := make([]*replica, 0, len(n.shards))
	for _, r := range n.shards {
		reps = append(reps, r)
	}
	meta := n.meta
	n.mu.RUnlock()
	for _, r := range reps {
		g.Replicas++
		if rt := r.group.keep; rt != nil {
			_, b := rt.log.Size()
			g.LogBytes += b
		}
		switch r.group.raft.State() {
		case raft.Leader:
			g.Leading++
			st := r.fsm.Stats()
			g.Keys += int64(st.States)
			g.KeyBytes += st.Bytes
			if r.fast != nil {
				g.FastPending += r.fast.pendingCost()
			}
		case raft.Follower, raft.Candidate:
			if r.group.leader() == "" {
				g.Leaderless++
			}
		}
	}
	if meta != nil {
		g.MetaLeader = meta.isLeader()
	}
	g.KeysRefused = n.keysRefused.Load()
	if off, ok := n.ClockOffset(); ok {
		g.ClockOffset = &off
	}
	g.ClockHeld = n.ClockHeld()
	if m := n.metaState(); m != nil && m.View().Slotted() {
		left := m.View().GroupIDsLeft()
		g.GroupIDsLeft = &left
	}
	g.Members = map[string]int{}
	for _, m := range n.Status().Nodes {
		g.Members[m.Health]++
	}
	return g
}
