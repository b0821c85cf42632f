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
	members, states, c := slotInput(v, key.ready)
	if acts := slots.PlanGroups(members, states, v.GroupsPerNode); len(acts) > 0 {
		n.applyGroupAction(ctx, acts[0])
		return true
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

// slotInput turns the meta state into what the slot planners look at:
// the members, each group's state and the slot cluster. ready says which
// groups can take part in a move now (nil: none, which only NextBatch
// reads).
func slotInput(v *fsm.MetaView, ready []bool) ([]slots.Member, []slots.GroupState, slots.Cluster) {
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
		unborn := int(g.ID) >= len(v.Reports) || v.Reports[g.ID] == nil
		states[i] = slots.GroupState{ID: slots.GroupID(g.ID), Home: g.Home, Retiring: g.Retiring, Owns: owns[g.ID], Busy: busy[g.ID], Unborn: unborn}
	}
	c := slots.Cluster{Table: make([]slots.GroupID, len(v.Table)), Target: slots.Target(states, members), InFlight: inFlight}
	for s, g := range v.Table {
		c.Table[s] = slots.GroupID(g)
	}
	for i, g := range v.Groups {
		c.Groups = append(c.Groups, slots.Group{ID: slots.GroupID(g.ID), Home: g.Home, Ready: i < len(ready) && ready[i]})
	}
	return members, states, c
}

// slotsToMove is how many slots the planner still has to move to spread
// them evenly, beyond the moves in flight: 0 once a cluster of slots is
// balanced. The planner starts moves in small batches, so a cluster with
// no move in flight may still be rebalancing; this tells the two apart.
func slotsToMove(v *fsm.MetaView) int {
	if !v.Slotted() {
		return 0
	}
	_, _, c := slotInput(v, nil)
	plan, err := slots.Plan(c)
	if err != nil {
		return 0
	}
	return slots.Slots(plan)
}

// viewCount caches a count computed from one (immutable) meta view.
type viewCount struct {
	view *fsm.MetaView
	n    int
}

// slotsToMove is slotsToMove(v), computed once per view: clients poll
// Status to route, and planning 1,024 slots costs about 85 µs.
func (n *Node) slotsToMove(v *fsm.MetaView) int {
	if c := n.toMove.Load(); c != nil && c.view == v {
		return c.n
	}
	c := &viewCount{view: v, n: slotsToMove(v)}
	n.toMove.Store(c)
	return c.n
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
// has reported an initialized state machine with as many voters as the
// group should have, and is alive. A new group starts as its home alone
// and adds its other replicas one at a time: slots moved into it before
// they vote would hold their counts on one node, and with it dead, no
// leader could ever be elected to serve them or move them out again.
func (n *Node) groupReady(v *fsm.MetaView, id uint32) bool {
	if int(id) >= len(v.Reports) {
		return false
	}
	rep := v.Reports[id]
	if rep == nil || !rep.Ready || rep.Leader == "" || voters(rep) < wantVoters(v) {
		return false
	}
	return rep.Leader == n.cfg.NodeID || n.gossip.alive(rep.Leader)
}

// voters counts the voters a leadership report lists.
func voters(rep *metav1.ShardReport) int {
	n := 0
	for _, r := range rep.Replicas {
		if r.Voter {
			n++
		}
	}
	return n
}

// wantVoters is how many voters a group should have: the cluster's
// replicas, or every active member when there are fewer.
func wantVoters(v *fsm.MetaView) int {
	active := 0
	for _, m := range v.Nodes {
		if m.State == metav1.NodeState_NODE_STATE_ACTIVE {
			active++
		}
	}
	return max(1, min(v.Replicas, active))
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
