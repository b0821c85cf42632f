package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// checkPeerMeta refuses a meta command sent by a peer that the state
// machine would take but that names what the meta state does not hold, or
// states what its sender cannot vouch for. The state machine stays as
// lenient as the entries already logged need (every replica must replay
// them alike), so these checks live here, at the entry point, against the
// state the command would be logged on. A body that does not decode is
// left to checkMeta, which says so.
//
// A peer's report of a group's leadership is confirmed with the leader it
// names: a report with a made-up term would make the meta state ignore
// every true report after it.
func (n *Node) checkPeerMeta(ctx context.Context, cmd []byte) error {
	if len(cmd) == 0 {
		return nil
	}
	v := n.View()
	typ, body := cmd[0], cmd[1:]
	member := func(field, id string) error {
		if err := CheckNodeID(field, id); err != nil {
			return err
		}
		if v.Node(id) == nil {
			return fmt.Errorf("%w: %s: %s is not a member of the cluster", ErrConfig, field, id)
		}
		return nil
	}
	switch typ {
	case fsm.MetaUpsertNode:
		var c metav1.UpsertNode
		if proto.Unmarshal(body, &c) != nil {
			return nil
		}
		if err := checkNode(c.Node); err != nil {
			return err
		}
		if s := c.Node.State; s < metav1.NodeState_NODE_STATE_UNSPECIFIED || s > metav1.NodeState_NODE_STATE_DEAD {
			return fmt.Errorf("%w: node.state: unknown node state %d", ErrConfig, s)
		}
		if err := checkIncarnation(v.Node(c.Node.Id), c.Node); err != nil {
			return err
		}
		// A member's own update of its record, as its join (AddNode): a
		// copy of a live member's data dir, started elsewhere, would
		// otherwise move the member's record, and its Raft traffic, to
		// itself.
		return n.checkNotImpostor(v.Node(c.Node.Id), c.Node)
	case fsm.MetaShardReport:
		var c metav1.ShardReport
		if proto.Unmarshal(body, &c) != nil {
			return nil
		}
		if err := member("leader", c.Leader); err != nil {
			return err
		}
		for i, r := range c.Replicas {
			if err := CheckNodeID(fmt.Sprintf("replicas[%d].node_id", i), r.GetNodeId()); err != nil {
				return err
			}
		}
		return n.confirmReport(ctx, v.Node(c.Leader), &c)
	case fsm.MetaAddGroup:
		var c metav1.AddGroup
		if proto.Unmarshal(body, &c) != nil {
			return nil
		}
		return member("home", c.Home)
	case fsm.MetaRehomeGroup:
		var c metav1.RehomeGroup
		if proto.Unmarshal(body, &c) != nil {
			return nil
		}
		return member("home", c.Home)
	case fsm.MetaMoveFrozen:
		var c metav1.MoveFrozen
		if proto.Unmarshal(body, &c) != nil {
			return nil
		}
		if mv := v.Move(c.Move); mv != nil && mv.State == fsm.MovePlanned {
			return n.confirmMove(ctx, v, mv, int(mv.From), false)
		}
	case fsm.MetaMoveImported:
		var c metav1.MoveImported
		if proto.Unmarshal(body, &c) != nil {
			return nil
		}
		if mv := v.Move(c.Move); mv != nil && mv.State == fsm.MoveFlipped {
			return n.confirmMove(ctx, v, mv, int(mv.To), true)
		}
	}
	return nil // a step of a move already past it changes nothing
}

// confirmMove asks replicas of group whether the group has applied mv's
// freeze (imported false: group is the move's source) or its import (the
// target): this node's own replica first, then those the group's last
// report names. A flip logged before the source froze would let the
// target count the slots afresh beside the source's counts; a move closed
// before the target imported would drop them. A step no replica asked
// vouches for is refused as retryable: nothing was written, and the mover
// logs it again on its next pass.
func (n *Node) confirmMove(ctx context.Context, v *fsm.MetaView, mv *fsm.SlotMove, group int, imported bool) error {
	done := func(frozen, in bool) bool { return (!imported && frozen) || (imported && in) }
	if done(n.MoveApplied(group, mv.ID, mv.Slots)) {
		return nil
	}
	for _, id := range reportedReplicas(v, group) {
		m := v.Node(id)
		if id == n.cfg.NodeID || m == nil || m.GrpcAddr == "" {
			continue
		}
		frozen, in, err := n.peers.MoveApplied(ctx, m.GrpcAddr, group, mv.ID, mv.Slots)
		if (err == nil && done(frozen, in)) || errors.Is(err, ErrNoMoveQuery) {
			// A replica of an older release, mid-roll, cannot vouch: the
			// step is taken on its sender's word, as that release did,
			// rather than left with its slots frozen until the roll ends.
			return nil
		}
	}
	step := "freeze"
	if imported {
		step = "import"
	}
	return fmt.Errorf("%w: move: no replica of group %d asked has applied move %d's %s", ErrNoLeader, group, mv.ID, step)
}

// confirmReport asks the node a report names as the group's leader
// whether it leads the group at the report's term with the report's
// replicas. A leader that has moved on since it sent its report reports
// again on its next pass.
func (n *Node) confirmReport(ctx context.Context, leader *metav1.Node, c *metav1.ShardReport) error {
	var info GroupInfo
	if leader.Id == n.cfg.NodeID {
		info = n.Progress(int(c.Shard))
	} else {
		var err error
		if info, err = n.peers.Progress(ctx, leader.GrpcAddr, int(c.Shard)); err != nil {
			// Nothing was written: the sender may try again (it reports
			// again on its next pass anyway).
			return fmt.Errorf("%w: leader: %s could not confirm the report: %v", ErrNoLeader, leader.Id, err)
		}
	}
	switch {
	case !info.Leader:
		return fmt.Errorf("%w: leader: %s does not lead group %d", ErrConfig, leader.Id, c.Shard)
	case info.Term != c.Term:
		return fmt.Errorf("%w: term: %s leads group %d in term %d, not %d", ErrConfig, leader.Id, c.Shard, info.Term, c.Term)
	}
	ids := make([]string, len(c.Replicas))
	for i, r := range c.Replicas {
		ids[i] = r.NodeId
	}
	slices.Sort(ids)
	servers := slices.Sorted(slices.Values(info.Servers))
	if !slices.Equal(ids, servers) {
		return fmt.Errorf("%w: replicas: group %d's replicas are %v, not %v", ErrConfig, c.Shard, servers, ids)
	}
	return nil
}
