package cluster

import (
	"context"
	"slices"

	"github.com/floodgate/floodgate/cluster/slots"
	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// reconcileGroups runs on the meta leader of a cluster of slots. It keeps
// the group set following the nodes (slots.PlanGroups: every active node
// home to GroupsPerNode groups, groups of departed nodes rehomed or retired
// and removed once empty), then starts the next batch of slot moves toward
// an even spread (slots.Plan, slots.NextBatch). It makes at most one change
// per round and reports whether it made one.
func (n *Node) reconcileGroups(ctx context.Context, v *fsm.MetaView) bool {
	if !v.Slotted() {
		return false
	}
	// An idle meta leader runs this every reconcile tick; the plan is a
	// pure function of the meta state and of which groups are ready, so
	// a round that found nothing to do need not be run again until one
	// of them changes.
	key := &planKey{view: v, ready: make([]bool, len(v.Groups))}
	for i, g := range v.Groups {
		key.ready[i] = n.groupReady(v, g.ID)
	}
	if last := n.settled.Load(); last != nil && last.equal(key) {
		return false
	}
	members := make([]slots.Member, 0, len(v.Nodes))
	for _, m := range v.Nodes {
		members = append(members, slots.Member{ID: m.Id, Active: m.State == metav1.NodeState_NODE_STATE_ACTIVE})
	}
	owns := make(map[uint32]int, len(v.Groups))
	for _, g := range v.Table {
		owns[g]++
	}
	busy := map[uint32]bool{}
	inFlight := make([]slots.Move, 0, len(v.Moves))
	for _, mv := range v.Moves {
		busy[mv.From], busy[mv.To] = true, true
		if mv.State == fsm.MovePlanned {
			// Counted at its target, as the planner counts it.
			owns[mv.From] -= len(mv.Slots)
			owns[mv.To] += len(mv.Slots)
		}
		ms := make([]int, len(mv.Slots))
		for i, s := range mv.Slots {
			ms[i] = int(s)
		}
		inFlight = append(inFlight, slots.Move{From: slots.GroupID(mv.From), To: slots.GroupID(mv.To), Slots: ms})
	}
	states := make([]slots.GroupState, len(v.Groups))
	for i, g := range v.Groups {
		states[i] = slots.GroupState{ID: slots.GroupID(g.ID), Home: g.Home, Retiring: g.Retiring, Owns: owns[g.ID], Busy: busy[g.ID]}
	}
	if acts := slots.PlanGroups(members, states, v.GroupsPerNode); len(acts) > 0 {
		n.applyGroupAction(ctx, acts[0])
		return true
	}
	c := slots.Cluster{Table: make([]slots.GroupID, len(v.Table)), Target: slots.Target(states, members), InFlight: inFlight}
	for s, g := range v.Table {
		c.Table[s] = slots.GroupID(g)
	}
	for i, g := range v.Groups {
		c.Groups = append(c.Groups, slots.Group{ID: slots.GroupID(g.ID), Home: g.Home, Ready: key.ready[i]})
	}
	plan, err := slots.Plan(c)
	if err != nil {
		n.log.Error("slot plan", "err", err)
		return false
	}
	batch := slots.NextBatch(c, plan, slots.Limits{})
	if len(batch) == 0 {
		n.settled.Store(key)
		return false
	}
	cmd := &metav1.PlanMoves{}
	moved := 0
	for _, mv := range batch {
		m := &metav1.Move{From: uint32(mv.From), To: uint32(mv.To)}
		for _, s := range mv.Slots {
			m.Slots = append(m.Slots, uint32(s))
		}
		moved += len(mv.Slots)
		cmd.Moves = append(cmd.Moves, m)
	}
	if err := n.applyMeta(ctx, fsm.MetaPlanMoves, cmd); err != nil {
		n.log.Warn("plan slot moves", "err", err)
		return true
	}
	n.log.Info("slot moves planned", "moves", len(batch), "slots", moved, "still to move", slots.Slots(plan)-moved)
	return true
}

// planKey is what a slot plan depends on: the meta state (a view is
// never changed once published) and which groups are ready.
type planKey struct {
	view  *fsm.MetaView
	ready []bool
}

func (k *planKey) equal(o *planKey) bool {
	return k.view == o.view && slices.Equal(k.ready, o.ready)
}

// groupReady reports whether group can take part in a move now: its leader
// has reported an initialized state machine and is alive.
func (n *Node) groupReady(v *fsm.MetaView, id uint32) bool {
	if int(id) >= len(v.Reports) {
		return false
	}
	rep := v.Reports[id]
	return rep != nil && rep.Ready && rep.Leader != "" && (rep.Leader == n.cfg.NodeID || n.gossip.alive(rep.Leader))
}

// applyGroupAction writes one group-set change of the planner.
func (n *Node) applyGroupAction(ctx context.Context, a slots.GroupAction) {
	var err error
	switch a.Kind {
	case slots.Add:
		err = n.applyMeta(ctx, fsm.MetaAddGroup, &metav1.AddGroup{Home: a.Home})
	case slots.Rehome:
		err = n.applyMeta(ctx, fsm.MetaRehomeGroup, &metav1.RehomeGroup{Group: uint32(a.Group), Home: a.Home})
	case slots.Retire:
		err = n.applyMeta(ctx, fsm.MetaRetireGroup, &metav1.RetireGroup{Group: uint32(a.Group)})
	case slots.Remove:
		err = n.applyMeta(ctx, fsm.MetaRemoveGroup, &metav1.RemoveGroup{Group: uint32(a.Group)})
	}
	if err != nil {
		n.log.Warn("group set change", "action", a, "err", err)
		return
	}
	n.log.Info("group set change", "action", a)
}
