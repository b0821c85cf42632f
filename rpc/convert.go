package rpc

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/validate"
)

// parseCheck validates one request and turns it into the check a shard log
// entry carries, resolving a named policy from the node's meta state;
// field prefixes error messages.
func (s *Server) parseCheck(ctx context.Context, req *pb.AllowRequest, field string, inline *validate.Inline) (fsm.Check, error) {
	var resolve validate.Resolver
	if req.GetPolicy() != "" {
		resolve = resolver(ctx, s.node)
	}
	c, err := validate.Request(req, field, maxLog(s.cfg.MaxLogLength, s.node), resolve, inline)
	if err != nil {
		return fsm.Check{}, err
	}
	return fsm.Check{Key: c.Key, Policy: c.Policy, Cost: c.Cost}, nil
}

// catchUpWait bounds how long a node looks for a policy it does not know
// yet, in case it was set a moment ago through another node.
const catchUpWait = time.Second

// resolver finds named policies in node's copy of the meta state. A name it
// does not know may have just been set elsewhere: it first catches up with
// the meta leader, so a client that sets a policy and uses it at once, on
// any node, finds it.
func resolver(ctx context.Context, node *cluster.Node) validate.Resolver {
	return func(name string) (*policy.Policy, error) {
		if p := node.View().Policy(name); p != nil {
			return p, nil
		}
		cctx, cancel := context.WithTimeout(ctx, catchUpWait)
		defer cancel()
		if err := node.CatchUpMeta(cctx); err != nil {
			// Not known here, and the meta leader cannot say: the policy
			// may well exist, so this is no bad request but a node that
			// cannot answer yet.
			return nil, fmt.Errorf("%w: policy %q: cannot reach the meta leader to look it up: %v", cluster.ErrNotReady, name, err)
		}
		return node.View().Policy(name), nil
	}
}

// resultToProto converts a decision on c; times become Unix milliseconds,
// a retry-after rounded up so a client that waits exactly that long is in
// time.
func resultToProto(c fsm.Check, r policy.Result) *pb.AllowResponse {
	ms := int64(time.Millisecond)
	return &pb.AllowResponse{
		Allowed:      r.Allowed,
		Limit:        r.Limit,
		Remaining:    r.Remaining,
		ResetAtMs:    (r.ResetAt + ms - 1) / ms,
		RetryAfterMs: (r.RetryAfter + ms - 1) / ms,
		ResetAfterMs: (r.ResetAfter + ms - 1) / ms,
		WindowMs:     c.Policy.WindowOf(r) / ms,
		DecidedBy:    c.Policy.DecidedBy(r),
		WouldDeny:    r.WouldDeny,
		Key:          policy.DisplayKey(c.Key),
	}
}

// decisionToProto and decisionFromProto carry a result between nodes at
// full precision.
func decisionToProto(r policy.Result) *peerv1.Decision {
	return &peerv1.Decision{
		Allowed: r.Allowed, Decider: int32(r.Decider), Limit: r.Limit, Remaining: r.Remaining,
		ResetAt: r.ResetAt, RetryAfter: r.RetryAfter, WouldDeny: r.WouldDeny, Outcome: uint32(r.Outcome),
		ResetAfter: r.ResetAfter,
	}
}

func decisionFromProto(d *peerv1.Decision) policy.Result {
	return policy.Result{
		Allowed: d.GetAllowed(), Decider: int(d.GetDecider()), Limit: d.GetLimit(), Remaining: d.GetRemaining(),
		ResetAt: d.GetResetAt(), RetryAfter: d.GetRetryAfter(), WouldDeny: d.GetWouldDeny(), Outcome: policy.Outcome(d.GetOutcome()),
		ResetAfter: d.GetResetAfter(),
	}
}
