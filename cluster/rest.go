package cluster

import (
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// restPause is the longest pause between two reconcile passes of a node
// whose cluster is at rest. Every step a reconciler takes either changes
// the meta state, which starts a pass at once, or waits for something only
// a timer sees (a new replica catching up, a new leader settling, a
// transfer cooldown); those run every ReconcileInterval. A cluster at rest
// has only slow timers left (idle shards' ticks every 10s, dead nodes
// after DeadAfter, gossip rejoins every 2s), so its passes back off to
// this: on an idle node they were the most frequent wakeup after the
// heartbeats.
const restPause = 2 * time.Second

// nextPause is the pause after a pass, given the one before it: doubling
// up to restPause while the cluster is at rest, base otherwise.
func nextPause(prev, base time.Duration, rest bool) time.Duration {
	if !rest {
		return base
	}
	return min(2*prev, max(base, restPause))
}

// atRest reports whether v shows nothing left to do: every node active, no
// slot move in flight or still to plan (toMove), and every placed shard
// reported led by its preferred leader with exactly its placed replicas,
// all voters.
func atRest(v *fsm.MetaView, pl *placement, toMove int) bool {
	if !v.Initialized() || len(v.Moves) > 0 || toMove > 0 {
		return false
	}
	for _, m := range v.Nodes {
		if m.State != metav1.NodeState_NODE_STATE_ACTIVE {
			return false
		}
	}
	for s, want := range pl.shards {
		if len(want) == 0 {
			continue // a removed group: nothing routes to it
		}
		if s >= len(v.Reports) || v.Reports[s] == nil {
			return false
		}
		voters := make([]*metav1.Replica, len(want))
		for i, id := range want {
			voters[i] = &metav1.Replica{NodeId: id, Voter: true}
		}
		if rep := v.Reports[s]; rep.Leader != want[0] || !sameReplicas(rep.Replicas, voters) {
			return false
		}
	}
	return true
}

// localAtRest reports whether this node holds exactly the replicas pl
// gives it, none of its groups led by the wrong node, its own record up to
// date, no reconcile step running, and, when it leads the meta group, every
// node in it with as many voters as balanceMetaVoters wants.
func (n *Node) localAtRest(v *fsm.MetaView, pl *placement) bool {
	me := n.cfg.NodeID
	if addrsDiffer(v.Node(me), n.self()) {
		return false
	}
	n.recon.mu.Lock()
	busy := len(n.recon.busy)
	n.recon.mu.Unlock()
	if busy > 0 {
		return false
	}
	local := n.replicas()
	held := 0
	for s, want := range pl.shards {
		if slices.Contains(want, me) {
			held++
			if n.replica(s) == nil {
				return false
			}
		}
	}
	if held != len(local) {
		return false
	}
	for _, r := range local {
		if r.id >= len(pl.shards) || len(pl.shards[r.id]) == 0 || r.group.isLeader() != (pl.shards[r.id][0] == me) {
			return false
		}
	}
	meta := n.metaGroup()
	if meta == nil || !meta.isLeader() {
		return true
	}
	cfg, err := meta.configuration()
	if err != nil || len(cfg.Servers) != len(v.Nodes) {
		return false
	}
	voters := 0
	for _, s := range cfg.Servers {
		if v.Node(string(s.ID)) == nil {
			return false
		}
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	return voters == min(metaVoters, len(v.Nodes))
}
