package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/floodgate/floodgate/cluster"
)

// leaders is what onLeader needs of a node: its own id and the route to a
// group's leader.
type leaders interface {
	ID() string
	Route(shard int) (cluster.Route, error)
}

// onLeader runs call against the leader of shard, this node or a peer,
// until it succeeds or fails for good, for at most wait. It retries only
// what cluster.Retryable says was written nowhere (not the leader, no
// leader yet, not ready, not sent), following a not-leader hint at once;
// with readOnly (a backup's export), it retries any failure but a bad
// request or one too large, since reading twice does no harm. A write
// that may have been applied is never sent again, a reset or a restore no
// more than a check: applied twice, it would erase what was counted
// between the two. The wait bounds the whole call, a stalled leader
// included: its callers get Unavailable, not the stall.
func onLeader(ctx context.Context, node leaders, shard int, wait time.Duration, readOnly bool,
	call func(ctx context.Context, rt cluster.Route) error) error {
	deadline := time.Now().Add(wait)
	parent := ctx
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var hint cluster.Route
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				if parent.Err() == nil {
					return last // the wait is over: nothing more was written
				}
				return fmt.Errorf("%w (last error: %v)", parent.Err(), last)
			case <-time.After(retryDelay(attempt)):
			}
		}
		rt := hint
		hint = cluster.Route{}
		if rt.Addr == "" {
			var err error
			if rt, err = node.Route(shard); err != nil {
				last = err
				continue
			}
		}
		err := call(ctx, rt)
		var nl *cluster.NotLeaderError
		switch {
		case err == nil:
			return nil
		case errors.Is(err, cluster.ErrMoved):
			return err // the caller routes it again: not this group's key
		case cluster.Retryable(err):
			if errors.As(err, &nl) && nl.LeaderAddr != "" && nl.LeaderID != node.ID() {
				hint = cluster.Route{NodeID: nl.LeaderID, Addr: nl.LeaderAddr, Hint: true}
			}
		case !readOnly, codeOf(err) == codeOf(ErrInvalid), codeOf(err) == codes.ResourceExhausted:
			return err // a full group, a message too large: the same again
		}
		last = err
	}
}

// retryDelay paces retries while a shard elects a leader: quick at first,
// then every 50ms.
func retryDelay(attempt int) time.Duration {
	if attempt == 1 {
		return 0
	}
	return min(time.Duration(attempt)*10*time.Millisecond, 50*time.Millisecond)
}
