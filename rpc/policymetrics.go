package rpc

import (
	"context"
	"slices"
	"time"

	"github.com/floodgate/floodgate/fsm"
)

// metaSource is what ForgetDeletedPolicies reads of a node.
type metaSource interface {
	View() *fsm.MetaView
	MetaChanged() <-chan struct{}
}

// forgetPause spaces the passes of ForgetDeletedPolicies: a burst of meta
// changes (slot moves while a node joins) costs one pass a second.
const forgetPause = time.Second

// ForgetDeletedPolicies calls forget (metrics.ForgetPolicies) with the
// policies node's meta state has, and their limits, at start and after
// each change of it, until ctx ends: the decision series of a deleted
// policy, or of a limit renamed or removed, then go with it.
func ForgetDeletedPolicies(ctx context.Context, node metaSource, forget func(has func(policy, limit string) bool)) {
	for {
		changed := node.MetaChanged() // before the view: a change meanwhile is not missed
		v := node.View()
		forget(func(name, limit string) bool {
			p, ok := v.Policies[name]
			return ok && slices.Contains(p.DecisionLabels(), limit)
		})
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(forgetPause):
		}
	}
}
