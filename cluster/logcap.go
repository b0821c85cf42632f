package cluster

import (
	"fmt"
	"maps"
	"slices"

	"github.com/floodgate/floodgate/fsm"
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
			return fmt.Errorf("%w: max_log_length: node %s's --max-log-length %d cannot hold policy %s (%v): start it with the --max-log-length of the others, or change the policy first",
				ErrConfig, node.Id, node.MaxLogLength, name, err)
		}
	}
	return nil
}
