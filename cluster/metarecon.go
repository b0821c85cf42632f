package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// reconcileMeta runs on the meta leader. It turns gossip into membership
// states (dead after DeadAfter, active again when back), removes drained
// leaving nodes, and keeps the meta group's own voters: up to metaVoters
// active nodes vote, every other member follows as a non-voter. It makes
// at most one change per round. listed is when this node first saw each
// member listed (unreachableSince).
func (n *Node) reconcileMeta(ctx context.Context, v *fsm.MetaView, listed listedAt) {
	me := n.cfg.NodeID
	meta := n.metaGroup()
	if meta == nil {
		return
	}
	for _, m := range v.Nodes {
		if m.Id == me {
			continue
		}
		health, since := n.gossip.health(m.Id)
		since = unreachableSince(health, since, listed[m.Id])
		down := health == HealthDead || health == HealthUnknown
		switch {
		case m.State == metav1.NodeState_NODE_STATE_ACTIVE && down && time.Since(since) > n.cfg.DeadAfter:
			n.log.Warn("node unreachable: moving its replicas away", "dead", m.Id, "for", time.Since(since).Round(time.Second))
			n.setState(ctx, m.Id, m.State, metav1.NodeState_NODE_STATE_DEAD)
			return
		case m.State == metav1.NodeState_NODE_STATE_DEAD && health == HealthAlive:
			n.log.Info("node reachable again", "node", m.Id)
			n.setState(ctx, m.Id, m.State, metav1.NodeState_NODE_STATE_ACTIVE)
			return
		}
	}
	cfg, err := meta.configuration()
	if err != nil {
		return
	}
	// A leaving node that holds no replica any more is removed: first from
	// the meta state (so it learns it left), then from the meta group.
	for _, m := range v.Nodes {
		if m.State != metav1.NodeState_NODE_STATE_LEAVING || holdsReplicas(v, m.Id) {
			continue
		}
		if m.Id == me {
			_ = meta.transferLeadership(ctx, nil)
			return
		}
		if err := n.applyMeta(ctx, fsm.MetaRemoveNode, &metav1.RemoveNode{Id: m.Id}); err == nil {
			n.log.Info("node drained and removed", "node", m.Id)
		}
		return
	}
	servers := map[string]raft.Server{}
	for _, s := range cfg.Servers {
		servers[string(s.ID)] = s
	}
	live := n.metaLive()
	var kept []string
	for _, s := range cfg.Servers {
		if v.Node(string(s.ID)) != nil || string(s.ID) == me {
			kept = append(kept, string(s.ID))
		}
	}
	for _, s := range removalOrder(cfg.Servers, kept, live) {
		if s.Suffrage == raft.Voter && live(string(s.ID)) && !liveQuorumWithout(cfg.Servers, string(s.ID), live) {
			// Not yet: a dead voter is demoted first (balanceMetaVoters).
			continue
		}
		n.change(ctx, meta, "remove", string(s.ID), func() raft.IndexFuture {
			return meta.raft.RemoveServer(s.ID, 0, opTimeout)
		})
		return
	}
	for _, m := range v.Nodes {
		if _, ok := servers[m.Id]; !ok && n.gossip.alive(m.Id) && m.State != metav1.NodeState_NODE_STATE_LEAVING {
			n.change(ctx, meta, "add non-voter", m.Id, func() raft.IndexFuture {
				return meta.raft.AddNonvoter(raft.ServerID(m.Id), raft.ServerAddress(m.RaftAddr), 0, opTimeout)
			})
			return
		}
	}
	if n.reconcileGroups(ctx, v) {
		return
	}
	n.balanceMetaVoters(ctx, meta, v, cfg)
}

// balanceMetaVoters promotes caught-up active non-voters while fewer than
// metaVoters active nodes vote, and demotes voters that are leaving or dead
// once enough active ones vote without them: unreachable ones first, and
// a reachable one only while the voters left have a live majority.
func (n *Node) balanceMetaVoters(ctx context.Context, meta *Group, v *fsm.MetaView, cfg raft.Configuration) {
	me := n.cfg.NodeID
	activeNodes, activeVoters := 0, 0
	for _, m := range v.Nodes {
		if m.State == metav1.NodeState_NODE_STATE_ACTIVE {
			activeNodes++
		}
	}
	for _, s := range cfg.Servers {
		if m := v.Node(string(s.ID)); s.Suffrage == raft.Voter && m != nil && m.State == metav1.NodeState_NODE_STATE_ACTIVE {
			activeVoters++
		}
	}
	want := min(metaVoters, activeNodes)
	if activeVoters < want {
		for _, s := range cfg.Servers {
			m := v.Node(string(s.ID))
			if s.Suffrage == raft.Voter || m == nil || m.State != metav1.NodeState_NODE_STATE_ACTIVE {
				continue
			}
			if n.caughtUp(ctx, meta, metaGroup, m.Id, v) {
				n.change(ctx, meta, "promote to voter", m.Id, func() raft.IndexFuture {
					return meta.raft.AddVoter(s.ID, s.Address, 0, opTimeout)
				})
				return
			}
		}
		return
	}
	var active []string
	for _, m := range v.Nodes {
		if m.State == metav1.NodeState_NODE_STATE_ACTIVE {
			active = append(active, m.Id)
		}
	}
	live := n.metaLive()
	for _, s := range removalOrder(cfg.Servers, active, live) {
		m := v.Node(string(s.ID))
		if s.Suffrage != raft.Voter || m == nil {
			continue
		}
		if m.State == metav1.NodeState_NODE_STATE_DEAD && keepDeadVoter(cfg, v, activeVoters) {
			continue
		}
		if live(m.Id) && !liveQuorumWithout(cfg.Servers, m.Id, live) {
			return // wait: the unreachable voters go first, or come back
		}
		if m.Id == me {
			_ = meta.transferLeadership(ctx, nil)
			return
		}
		n.change(ctx, meta, "demote", m.Id, func() raft.IndexFuture {
			return meta.raft.DemoteVoter(s.ID, 0, opTimeout)
		})
		return
	}
}

// keepDeadVoter reports whether the meta group keeps its one dead voter:
// beside an even number of active voters it costs no tolerance (two of
// three, like two of two, survive no other failure), and the group is
// whole again as soon as the node returns; demoted, three nodes would
// vote two of two until it had been promoted again, and a failure in
// that time would stop the meta group that it and the survivor could
// have formed. Beside an odd number, or with another dead voter, it
// would raise the quorum: it goes (as placement.go's keepDead).
func keepDeadVoter(cfg raft.Configuration, v *fsm.MetaView, activeVoters int) bool {
	dead := 0
	for _, s := range cfg.Servers {
		if m := v.Node(string(s.ID)); s.Suffrage == raft.Voter && m != nil && m.State == metav1.NodeState_NODE_STATE_DEAD {
			dead++
		}
	}
	return dead == 1 && activeVoters > 0 && activeVoters%2 == 0
}

// metaLive is whom the meta leader takes for reachable when it orders
// voters out (removalOrder): itself, and the nodes gossip sees.
func (n *Node) metaLive() func(id string) bool {
	return func(id string) bool { return id == n.cfg.NodeID || n.gossip.alive(id) }
}

// setState moves member id from state from, which the pass read in its
// view, to st, on this node, the meta leader, and only if id is still in
// from: a leave written meanwhile (through this leader, which writes node
// states one at a time: stateMu) is not overwritten by the pass's dead or
// active, which would leave the node a member whose leave never ends. The
// entry itself stays unconditional (MetaSetNodeState), as every release
// reads it.
func (n *Node) setState(ctx context.Context, id string, from, st metav1.NodeState) {
	meta := n.metaGroup()
	if meta == nil || !meta.isLeader() {
		return // the next leader's pass judges again
	}
	cmd, err := fsm.EncodeMeta(fsm.MetaSetNodeState, &metav1.SetNodeState{Id: id, State: st})
	if err != nil {
		return
	}
	n.stateMu.Lock()
	defer n.stateMu.Unlock()
	if m := n.View().Node(id); m == nil || m.State != from {
		return // changed since the pass read it: a leave, or a removal
	}
	if err := n.applyLocalMetaLocked(meta, cmd); err != nil {
		n.log.Warn("set node state", "node", id, "state", st, "err", err)
	}
}

// holdsReplicas reports whether any shard's latest report lists id.
func holdsReplicas(v *fsm.MetaView, id string) bool {
	for _, r := range v.Reports {
		if r != nil && reportHas(r.Replicas, id) {
			return true
		}
	}
	return false
}

// unreachableSince is since when a member gossip reports down has been
// unreachable, given since (gossip's: when it went down, or this node's
// start for one it never saw) and listed (when this node first saw it
// listed a member): a member gossip never saw is not down for the time
// before it joined. A node of an older release joins gossip only after
// the cluster lists it; it was declared dead at its join (for as long as
// the meta leader had run), and alive again a moment later.
func unreachableSince(health string, since, listed time.Time) time.Time {
	if health == HealthUnknown && listed.After(since) {
		return listed
	}
	return since
}

// listedAt remembers when this node first saw each member listed.
type listedAt map[string]time.Time

// note records now for the members of v first seen, forgets those no
// longer listed, and returns the record.
func (l *listedAt) note(v *fsm.MetaView, now time.Time) listedAt {
	if *l == nil {
		*l = listedAt{}
	}
	for _, m := range v.Nodes {
		if _, ok := (*l)[m.Id]; !ok {
			(*l)[m.Id] = now
		}
	}
	for id := range *l {
		if v.Node(id) == nil {
			delete(*l, id)
		}
	}
	return *l
}
