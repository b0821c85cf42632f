package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/sent"
	"github.com/floodgate/floodgate/rpc/validate"
)

// ResetKey implements pb.AdminServer. A reset is sent again, as a check
// is, only while it was written nowhere (no leader yet, not the leader),
// and routed again while the group turns out not to own the key (a slot
// moving, or this node's slot table behind). One whose entry may have been
// applied fails Unavailable: applied twice, it would erase what was
// counted between the two.
func (a *AdminServer) ResetKey(ctx context.Context, req *pb.ResetKeyRequest) (*pb.ResetKeyResponse, error) {
	zero := int64(0)
	c, err := validate.Request(&pb.AllowRequest{
		Key: req.Key, Limit: req.Limit, Policy: req.Policy, Descriptors: req.Descriptors, Cost: &zero,
	}, "", maxLog(a.cfg.MaxLogLength, a.node), resolver(ctx, a.node), nil)
	if err != nil {
		return nil, toStatus(err)
	}
	var n int
	err = routedToOwner(ctx, a.node, c.Key, a.cfg.LeaderWait, func(ctx context.Context, shard int, wait time.Duration) error {
		return onLeader(ctx, a.node, shard, wait, false, func(ctx context.Context, rt cluster.Route) error {
			if rt.Local {
				var err error
				n, err = a.node.ResetKey(ctx, shard, c.Key, c.Policy)
				return err
			}
			var p peer.Peer
			resp, err := peerv1.NewPeerClient(a.peers.conn(rt.Addr)).ResetKey(ctx,
				&peerv1.PeerResetRequest{Shard: uint32(shard), Key: c.Key, Policy: c.Policy.AppendBinary(nil)}, grpc.Peer(&p))
			if err == nil {
				n = int(resp.States)
			}
			return peerWriteError(rt.Addr, err, &p)
		})
	})
	if err != nil {
		return nil, toStatus(fmt.Errorf("reset %s: %w", c.Key, err))
	}
	return &pb.ResetKeyResponse{Key: c.Key, States: int32(n)}, nil
}

// owners is what routedToOwner needs of a node: which group a key belongs
// to, and when that may change.
type owners interface {
	ShardOf(key string) (int, error)
	MetaChanged() <-chan struct{}
}

// routedToOwner runs do on the group of key, within wait, and again on the
// group the slot table then names while do finds the group does not own
// the key (cluster.ErrMoved: nothing done), after the table changes or a
// short pause (a move between its freeze and its flip), as the dispatcher
// routes a moved check.
func routedToOwner(ctx context.Context, node owners, key string, wait time.Duration, do func(ctx context.Context, shard int, wait time.Duration) error) error {
	deadline := time.Now().Add(wait)
	for round := 0; ; round++ {
		changed := node.MetaChanged() // before routing: a change meanwhile is not missed
		shard, err := node.ShardOf(key)
		if err != nil {
			return err
		}
		err = do(ctx, shard, time.Until(deadline))
		if errors.Is(err, cluster.ErrWrongShard) {
			// The table changed between ShardOf and the leader's look.
			err = fmt.Errorf("%w: %w", cluster.ErrMoved, err)
		}
		if !errors.Is(err, cluster.ErrMoved) {
			return err
		}
		if err := awaitTable(ctx, changed, deadline, round, err); err != nil {
			return err
		}
	}
}

// awaitTable waits, before round+1 of a call that found its group does
// not own its keys (err), for the slot table to change (changed closes)
// or a short pause (a move between its freeze and its flip), and returns
// nil to go on, or, past deadline or ctx's end, the error to return.
func awaitTable(ctx context.Context, changed <-chan struct{}, deadline time.Time, round int, err error) error {
	left := time.Until(deadline)
	if left <= 0 {
		return err
	}
	t := time.NewTimer(min(left, retryDelay(round+2)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
	case <-changed:
	case <-t.C:
	}
	return nil
}

// peerWriteError classifies a peer's failure of a write sent on this
// node's behalf (a reset, a restore's group) for onLeader, which sends a
// write again only when cluster.Retryable says it was written nowhere:
// a call that never left this node (sent.Never), or that the peer
// refused before writing (not the leader, no leader, not ready: a status
// whose message names it, and not an unknown outcome) may go again, to
// the leader as this node routes it; a group that does not own the key is
// peerOwnerError's; anything else is final.
func peerWriteError(addr string, err error, p *peer.Peer) error {
	if sent.Never(err, p) {
		return fmt.Errorf("%s: %w: %w", addr, errNotSent, err)
	}
	if st, ok := status.FromError(err); ok && err != nil && st.Code() == codes.Unavailable {
		msg := st.Message()
		for _, e := range []error{cluster.ErrNotLeader, cluster.ErrNoLeader, cluster.ErrNotReady} {
			if strings.Contains(msg, e.Error()) && !strings.Contains(msg, cluster.ErrUnavailable.Error()) &&
				!strings.Contains(msg, cluster.ErrMoved.Error()) {
				return fmt.Errorf("%s: %w: %s", addr, e, msg)
			}
		}
	}
	return peerOwnerError(addr, err)
}

// peerOwnerError is a peer's refusal of a call about keys (a reset, a
// restore's states), with a group that does not own the key (the peer's Unavailable naming cluster.ErrMoved, or its
// InvalidArgument naming cluster.ErrWrongShard: this node's slot table is
// behind the peer's) made cluster.ErrMoved, for routedToOwner to route it
// again.
func peerOwnerError(addr string, err error) error {
	st, ok := status.FromError(err)
	if err == nil || !ok {
		return peerRefusal(addr, err)
	}
	switch msg := st.Message(); {
	case st.Code() == codes.Unavailable && strings.Contains(msg, cluster.ErrMoved.Error()),
		st.Code() == codes.InvalidArgument && strings.Contains(msg, cluster.ErrWrongShard.Error()):
		return fmt.Errorf("%s: %w: %s", addr, cluster.ErrMoved, msg)
	}
	return peerRefusal(addr, err)
}
