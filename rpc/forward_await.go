package rpc

import (
	"context"
	"fmt"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/policy"
)

// routeWatch tells a forwarder where a group's leader is now, and when
// that may have changed; *cluster.Node is one.
type routeWatch interface {
	Route(shard int) (cluster.Route, error)
	LeadersChanged() <-chan struct{}
	MetaChanged() <-chan struct{}
}

// States of a fwdReq: queued until the queue claims it (to send it or to
// answer it unsent) or its caller withdraws it, whichever comes first.
const (
	reqQueued int32 = iota
	reqClaimed
	reqWithdrawn
)

// claim takes r for the queue; false when its caller withdrew it, and
// answered it, first.
func (r *fwdReq) claim() bool { return r.state.CompareAndSwap(reqQueued, reqClaimed) }

// withdraw takes r back from the queue before it is sent; false once the
// queue has claimed it (it may be on its way).
func (r *fwdReq) withdraw() bool { return r.state.CompareAndSwap(reqQueued, reqWithdrawn) }

// await waits for the answer to req, queued for the peer rt names. A
// request still queued when this node's route for its group moves away
// from that peer (its replica of the group saw the leader change or
// lose its leader, or the meta state names another) is withdrawn and
// answered "not sent": nothing was counted, and onLeader routes it again
// at once. A paused or cut-off leader holds the one call in flight to it
// until its callers' deadline (LeaderWait); without the withdrawal, every
// forward queued behind that call waited out the deadline too, long after
// an election had replaced the leader: 2 s of failover instead of the
// election's. Only a change seen after the request was queued counts: a
// forward that follows a peer's not-leader hint (rt.Hint) goes where this
// node's route does not point yet, and is not withdrawn for that. The
// route onLeader has just read is not read again: a change between that
// read and the queueing is missed, and the request waits as before. A
// caller that gives up before its request was sent is told so too.
func (f *forwarder) await(ctx context.Context, q *peerQueue, req *fwdReq, rt cluster.Route) ([]policy.Result, error) {
	addr := rt.Addr
	var leaders, meta <-chan struct{}
	first := addr // where this node's route pointed when the request was queued
	if f.routes != nil {
		leaders, meta = f.routes.LeadersChanged(), f.routes.MetaChanged()
		if rt.Hint {
			first = f.leaderAt(req.shard)
		}
	}
	for {
		select {
		case <-req.done:
			return req.results, req.err
		case <-q.done:
			// The queue stopped (peers closed). It answered everything it
			// took; a request it never took never left this node.
			select {
			case <-req.done:
				return req.results, req.err
			default:
				return nil, fmt.Errorf("forward to %s: %w", addr, errNotSent)
			}
		case <-ctx.Done():
			if req.withdraw() {
				return nil, fmt.Errorf("forward to %s: %w: %w", addr, errNotSent, ctx.Err())
			}
			return nil, fmt.Errorf("forward to %s: %w: %w", addr, cluster.ErrUnavailable, ctx.Err())
		case <-leaders:
			leaders = f.routes.LeadersChanged()
		case <-meta:
			meta = f.routes.MetaChanged()
		}
		if now := f.leaderAt(req.shard); now != addr && now != first && req.withdraw() {
			return nil, fmt.Errorf("forward to %s: the group's leader changed: %w", addr, errNotSent)
		}
	}
}

// Where leaderAt routes a group other than to a peer; neither is an
// address.
const (
	routedHere = "\x00here"
	routedNone = "\x00none"
)

// leaderAt says where this node routes shard now: the leader's address,
// routedHere, or routedNone (no leader known).
func (f *forwarder) leaderAt(shard int) string {
	rt, err := f.routes.Route(shard)
	switch {
	case err != nil:
		return routedNone
	case rt.Local:
		return routedHere
	}
	return rt.Addr
}
