package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// MaxLogLength is the longest sliding log the cluster may hold: the least
// --max-log-length of this node and the members that tell theirs. Checks
// and policies are validated against it on every node alike: a policy
// stored through a node of a larger cap was refused by the groups of a
// node of a smaller one, for some keys and not others.
func (n *Node) MaxLogLength() int64 {
	l := n.cfg.MaxLogLength
	if m := n.View().MaxLogLength; m > 0 && m < l {
		return m
	}
	return l
}

// checkLogCap refuses a node whose --max-log-length cannot hold a stored
// policy: its groups would refuse that policy's checks of the keys they
// own. A node of a release that tells no cap (0) passes.
func checkLogCap(v *fsm.MetaView, node *metav1.Node) error {
	if node.GetMaxLogLength() <= 0 {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(v.Policies)) {
		if err := v.Policies[name].Validate(node.MaxLogLength); err != nil {
			return fmt.Errorf("%w: max_log_length: node %s's --max-log-length %d cannot hold policy %s (%v): start it with the --max-log-length of the others, and change the policy before lowering the flag",
				ErrConfig, node.Id, node.MaxLogLength, name, err)
		}
	}
	return nil
}

// holdsPolicies refuses to start a member restarted with a cap that cannot
// hold a stored policy (a joining node is refused so by the meta leader, checkCaps), judged
// on the meta state caught up with the leader's when it answers in time:
// a resumed node's own may lack the latest policies. Serving, its groups
// would refuse that policy's checks of the keys they own, and the leader
// refuses its record's smaller cap (checkCaps), so the others would not
// know why.
func (n *Node) holdsPolicies(ctx context.Context) error {
	// Best effort, briefly: in a whole cluster's restart no meta leader
	// may answer yet, and the state this node has judges then.
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = n.CatchUpMeta(cctx)
	return checkLogCap(n.View(), n.self())
}

// checkCaps is the meta leader's check of a member record or a policy
// write against the caps, made under capMu with the write applied before
// the next check: the one that holds, whatever node took the request and
// whatever its view. A record that lowers its node's cap (or a new
// member's) must hold every stored policy; a policy must fit the least
// cap of the members and this node. A record that keeps its cap passes, so
// a member whose cap an older release let fall short still updates its
// addresses. Anything else passes, and a command that does not decode is
// left to checkMeta and the state machine.
func (n *Node) checkCaps(cmd []byte) error {
	v := n.View()
	switch cmd[0] {
	case fsm.MetaUpsertNode:
		var c metav1.UpsertNode
		if proto.Unmarshal(cmd[1:], &c) != nil || c.Node == nil {
			return nil
		}
		if old := v.Node(c.Node.Id); old != nil && old.MaxLogLength > 0 && c.Node.MaxLogLength >= old.MaxLogLength {
			return nil
		}
		return checkLogCap(v, c.Node)
	case fsm.MetaSetPolicies:
		var c metav1.SetPolicies
		if proto.Unmarshal(cmd[1:], &c) != nil {
			return nil
		}
		maxLog, of := n.MaxLogLength(), n.logCapOf(v)
		for i, b := range c.Policies {
			p, _, err := policy.Decode(b)
			if err != nil {
				return nil
			}
			if err := p.Validate(maxLog); err != nil {
				return fmt.Errorf("%w: policies[%d]: policy %s does not fit the cluster's --max-log-length %d (%s, the least of its members'): %w",
					ErrConfig, i, p.Name, maxLog, of, err)
			}
		}
	}
	return nil
}

// logCapOf names whose cap MaxLogLength is, given v: this node's or a
// member's.
func (n *Node) logCapOf(v *fsm.MetaView) string {
	if v.MaxLogLength > 0 && v.MaxLogLength < n.cfg.MaxLogLength {
		return "node " + v.MaxLogLengthOf + "'s"
	}
	return "this node's"
}

// noteLogCap says, when it changes, that the cluster's cap is below this
// node's own: checks and policies refused for it name a number the
// operator did not give this node. A member that stopped (its cap too
// small for a stored policy, or a join an older meta leader let in) still
// counts until it leaves. Only the reconcile loop calls it.
func (n *Node) noteLogCap(v *fsm.MetaView) {
	least, of := v.MaxLogLength, v.MaxLogLengthOf
	if least >= n.cfg.MaxLogLength || of == n.cfg.NodeID {
		// Its own record, from before a restart with a larger cap, is
		// updated by this loop's next pass.
		least, of = 0, ""
	}
	if least == n.recon.logCap && of == n.recon.logCapOf {
		return
	}
	n.recon.logCap, n.recon.logCapOf = least, of
	if least == 0 {
		n.log.Info("checks and policies are held to this node's --max-log-length again", "max_log_length", n.cfg.MaxLogLength)
		return
	}
	m := v.Node(of)
	n.log.Warn("checks and policies are held to a member's smaller --max-log-length, the least of the cluster's members'",
		"max_log_length", least, "node", of, "node_state", m.GetState().String(), "own", n.cfg.MaxLogLength,
		"fix", "start that node with the others' --max-log-length, or remove it (floodgatectl leave) if it is gone")
}
