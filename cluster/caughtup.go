package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Why a node is not ready the moment it is a member: a restarted member is
// one as soon as its own data dir lists it, before any group's leader has
// reached it. A rolling restart that goes on at that point (a readiness
// probe) stops the next node while this one may still be catching up, or
// may never be reached at all (a wrong --advertise-host, a Raft port its
// peers cannot open): every group then has one working replica of three,
// and no quorum. A node is ready once each replica it holds has applied
// what its leader had applied when asked, which takes the leader's
// appends, so its peers reach it.

const (
	// caughtUpTry bounds one try at catching every replica up
	// (watchCaughtUp tries again).
	caughtUpTry = 3 * time.Second
	// caughtUpEvery is the pause between tries.
	caughtUpEvery = 250 * time.Millisecond
	// caughtUpHintAfter is how long a node waits to catch up before it says
	// why it has not.
	caughtUpHintAfter = 15 * time.Second
)

// CaughtUp reports whether, since Start, every replica this node holds
// (the meta group's and each shard's) has caught up with its group's
// leader once. It stays true after: a group that loses its leader later
// does not make a node that serves the others unready.
func (n *Node) CaughtUp() bool { return n.synced.Load() }

// watchCaughtUp tries to catch every replica up until one try succeeds,
// then sets CaughtUp.
func (n *Node) watchCaughtUp() {
	defer n.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	hint := time.After(caughtUpHintAfter)
	for {
		tctx, tcancel := context.WithTimeout(ctx, caughtUpTry)
		err := n.catchUpReplicas(tctx)
		tcancel()
		if err == nil {
			n.synced.Store(true)
			return
		}
		select {
		case <-hint:
			n.log.Warn("not ready: a replica of this node has not caught up with its leader; check that peers reach this node's Raft address", "raft", n.cfg.RaftAddr, "err", err)
			hint = time.After(caughtUpHintAfter)
		case <-ctx.Done():
			return
		case <-time.After(caughtUpEvery):
		}
	}
}

// catchUpReplicas catches the meta group's replica up with its leader,
// then each shard replica.
func (n *Node) catchUpReplicas(ctx context.Context) error {
	if err := n.CatchUpMeta(ctx); err != nil {
		return fmt.Errorf("meta group: %w", err)
	}
	for _, r := range n.replicas() {
		if err := n.catchUpReplica(ctx, r); err != nil {
			return fmt.Errorf("%s: %w", shardName(r.id), err)
		}
	}
	return nil
}

// catchUpReplica waits until r has applied what its group's leader had
// applied when asked. A replica its leader does not count (one being
// removed, or not added yet) has nothing to catch up.
func (n *Node) catchUpReplica(ctx context.Context, r *replica) error {
	g := r.group
	if g.isLeader() {
		return nil
	}
	info, err := n.leaderProgress(ctx, r)
	if err != nil {
		return err
	}
	if !slices.Contains(info.Servers, n.cfg.NodeID) {
		return nil
	}
	for g.raft.AppliedIndex() < info.Applied {
		select {
		case <-ctx.Done():
			return fmt.Errorf("applied %d of the leader's %d: %w", g.raft.AppliedIndex(), info.Applied, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
