package rpc

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/metrics"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/tracing"
)

// decide answers checks (dispatch) and adds the answers to the node's
// metrics.
func (s *Server) decide(ctx context.Context, checks []fsm.Check) ([]policy.Result, []error) {
	res, errs := s.disp.dispatch(ctx, checks)
	s.count(checks, res, errs)
	return res, errs
}

// groupNode is what the dispatcher needs of a node: which group a key
// belongs to, who leads a group, when the slot table changes, and
// evaluating checks of a group it leads. *cluster.Node is one; tests give
// a scripted one.
type groupNode interface {
	leaders
	ShardOf(key string) (int, error)
	MetaChanged() <-chan struct{}
	Submit(ctx context.Context, shard int, checks []fsm.Check) ([]policy.Result, error)
}

// forwardFunc sends checks of a group to its leader, the peer rt names
// (forwarder.forwardTo).
type forwardFunc func(ctx context.Context, rt cluster.Route, shard int, checks []fsm.Check) ([]policy.Result, error)

// dispatcher answers checks on their groups' leaders: see dispatch.
type dispatcher struct {
	node    groupNode
	forward forwardFunc
	wait    time.Duration // how long a dispatch may route and retry (LeaderWait)
	limit   *admission    // the checks a node may wait on (nil: no bound)
}

// dispatch answers checks, each on the leader of its key's group (this
// node or a peer, one hop), all groups at once, within LeaderWait. It is
// the one dispatcher of the Allow path: errs[i] is check i's own error,
// and a check whose group turned out not to own its key (cluster.ErrMoved:
// a slot moved, nothing counted) is routed again once this node's slot
// table changes, until the wait is over. It counts no metrics: decide
// does, or a caller that changes the answers first (RLS).
func (d *dispatcher) dispatch(ctx context.Context, checks []fsm.Check) ([]policy.Result, []error) {
	ctx, span := tracing.Start(ctx, "floodgate.decide", attribute.Int("floodgate.checks", len(checks)))
	defer span.End()
	res := make([]policy.Result, len(checks))
	errs := make([]error, len(checks))
	if d.limit != nil {
		if !d.limit.take(len(checks)) {
			err := d.limit.overloaded()
			for i := range errs {
				errs[i] = err
			}
			return res, errs
		}
		defer d.limit.release(len(checks))
	}
	deadline := time.Now().Add(d.wait)
	pending := make([]int, len(checks))
	for i := range pending {
		pending[i] = i
	}
	var changed <-chan struct{}
	for round := 0; len(pending) > 0; round++ {
		if round > 0 && !d.awaitRouting(ctx, changed, deadline, round) {
			break // errs of pending checks say they were written nowhere
		}
		// Taken before routing, so a change during the calls is not missed.
		changed = d.node.MetaChanged()
		groups := d.groupByShard(checks, pending, errs)
		if len(groups) == 1 {
			// A single group (every single check): answered on this
			// goroutine, with no goroutine to start and grow a stack for.
			pending = d.evaluateInto(ctx, deadline, groups[0], checks, res, errs)
			continue
		}
		moved := make([][]int, len(groups))
		var wg sync.WaitGroup
		for k, g := range groups {
			gctx := ctx // never reassigned: the goroutine copies it, ctx stays on the stack
			wg.Go(func() { moved[k] = d.evaluateInto(gctx, deadline, g, checks, res, errs) })
		}
		wg.Wait()
		pending = slices.Concat(moved...)
	}
	return res, errs
}

// shardChecks are the checks of one group: indices into a dispatch's
// checks.
type shardChecks struct {
	shard int
	idx   []int
}

// groupByShard groups the pending checks by their key's group, in the
// order each group's first check came; a check whose group cannot be
// told gets its error in errs. A dispatch spans a few groups at most, so
// a linear search finds a check's.
func (d *dispatcher) groupByShard(checks []fsm.Check, pending []int, errs []error) []shardChecks {
	var groups []shardChecks
	shard, err := 0, error(nil)
	for _, i := range pending {
		// An atomic set goes where its first check goes: its policy
		// places all its keys in one slot (policy.Colocate).
		if !checks[i].Joined {
			shard, err = d.node.ShardOf(checks[i].Key)
		}
		if err != nil {
			errs[i] = err
			continue
		}
		k := slices.IndexFunc(groups, func(g shardChecks) bool { return g.shard == shard })
		if k < 0 {
			k = len(groups)
			groups = append(groups, shardChecks{shard: shard})
		}
		groups[k].idx = append(groups[k].idx, i)
	}
	return groups
}

// evaluateInto answers the checks of group g, writing res[i] and errs[i]
// for its indices (groups answered at once write apart). It returns the
// indices of the checks written nowhere while others were answered
// (cluster.Retryable: their slot moved, or the leader handed over), to
// route again; a call refused whole was retried by evaluate already.
func (d *dispatcher) evaluateInto(ctx context.Context, deadline time.Time, g shardChecks, checks []fsm.Check,
	res []policy.Result, errs []error) (moved []int) {
	// A copy even of all checks: the group's leader may mark them
	// (Elastic) while a caller that gave up reads its own.
	sub := make([]fsm.Check, len(g.idx))
	for j, i := range g.idx {
		sub[j] = checks[i]
	}
	r, err := d.evaluate(ctx, deadline, g.shard, sub)
	pe := partial(err)
	if pe != nil {
		r, err = pe.Results, nil
	}
	for j, i := range g.idx {
		e := err
		if pe != nil {
			e = pe.Errs[j]
		}
		switch {
		case e == nil:
			res[i], errs[i] = r[j], nil
		case cluster.Retryable(e):
			errs[i] = e
			moved = append(moved, i)
		default:
			errs[i] = e
		}
	}
	return moved
}

// partial returns err as a *cluster.PartialError (each check its own
// answer), or nil.
func partial(err error) *cluster.PartialError {
	if err == nil {
		return nil
	}
	var pe *cluster.PartialError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// count adds the answers of a dispatch to the node's metrics. Only a
// stored policy names its series: an inline limit, or an Envoy limit
// override under a domain no policy matches, is "inline", so a caller
// cannot mint a series per domain it invents. (Limit labels are bounded
// already: a stored limit's name, or limits[i].)
func (s *Server) count(checks []fsm.Check, res []policy.Result, errs []error) {
	var view *fsm.MetaView
	for i, err := range errs {
		if err != nil {
			metrics.CheckErrors.WithLabelValues(codeOf(err).String()).Inc()
			continue
		}
		p := checks[i].Policy
		name, consistency := metrics.Inline, "strict"
		if p.Name != "" {
			if view == nil {
				view = s.node.View()
			}
			if view.Policy(p.Name) != nil {
				name = p.Name
			}
		}
		if p.Consistency == policy.Fast {
			consistency = "fast"
		}
		metrics.Decisions.WithLabelValues(name, p.DecidedBy(res[i]), metrics.Outcome(res[i].Allowed, res[i].WouldDeny), consistency).Inc()
	}
}

// refuse counts the n checks of a request refused before any dispatch
// (the node not ready yet, a request that does not validate) as check
// errors, and returns err as the status their caller gets. Without it a
// node that answers every check Unavailable while it starts, or a whole
// cluster that cannot become ready, showed no failed check at all. A
// request refused for its size counts once, not once per item: one call
// of 400,000 empty items counted 400,000, and alerts on the error ratio
// read noise.
func refuse(n int, err error) error {
	metrics.CheckErrors.WithLabelValues(codeOf(err).String()).Add(float64(n))
	return toStatus(err)
}

// awaitRouting waits before routing moved checks again: for the slot table
// to change, or a short pause (the move may still be between its freeze
// and its flip). It reports false once the wait is over.
func (d *dispatcher) awaitRouting(ctx context.Context, changed <-chan struct{}, deadline time.Time, round int) bool {
	wait := time.Until(deadline)
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(min(wait, retryDelay(round+1)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	case <-t.C:
	}
	return time.Now().Before(deadline)
}

// evaluate answers checks of one group on its leader, this node or a peer,
// until deadline. A check is never counted twice: only what was written
// nowhere is retried (onLeader); moved checks come back for decide to route.
func (d *dispatcher) evaluate(ctx context.Context, deadline time.Time, shard int, checks []fsm.Check) ([]policy.Result, error) {
	var res []policy.Result
	err := onLeader(ctx, d.node, shard, time.Until(deadline), false, func(ctx context.Context, rt cluster.Route) error {
		var err error
		if rt.Local {
			res, err = d.node.Submit(ctx, shard, checks)
		} else {
			res, err = d.forward(ctx, rt, shard, checks)
		}
		return err
	})
	return res, err
}
