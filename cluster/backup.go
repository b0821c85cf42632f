package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/wallclock"
)

// leading returns this node's replica of group when it leads it, else
// where the leader is (a NotLeaderError).
func (n *Node) leading(group int) (*replica, error) {
	r := n.replica(group)
	if r == nil || !r.group.isLeader() {
		rt, _ := n.Route(group)
		return nil, &NotLeaderError{Group: shardName(group), LeaderID: rt.NodeID, LeaderAddr: rt.Addr}
	}
	return r, nil
}

// ExportGroup returns every live state of group, which this node must
// lead, for a backup: fast decisions answered so far are replicated first,
// and a barrier makes the state machine hold everything committed.
func (n *Node) ExportGroup(ctx context.Context, group int) ([]byte, error) {
	r, err := n.leading(group)
	if err != nil {
		return nil, err
	}
	r.fast.drain()
	if err := awaitFuture(ctx, r.group.raft.Barrier(n.cfg.CommitTimeout)); err != nil {
		return nil, fmt.Errorf("%s: %w", shardName(group), err)
	}
	return r.fsm.ExportAll()
}

// GroupOfKey returns the group that owns key now, or -1 when the node
// cannot say (not a member yet).
func (n *Node) GroupOfKey(key string) int {
	g, err := n.ShardOf(key)
	if err != nil {
		return -1
	}
	return g
}

// RestoreGroup writes states (a backup's, split by GroupOfKey) into
// group, which this node must lead. Every key must belong to group by
// this node's slot table, and to a slot the group's state machine owns
// (else ErrMoved: split again and resend), and the states' log time must
// pass CheckRestoreTime on this node, whoever sent them, and the group
// must have room for them under --max-key-states and --max-state-mib
// (else ErrFull). It
// returns the number of keys.
func (n *Node) RestoreGroup(ctx context.Context, group int, states []byte) (int, error) {
	r, err := n.leading(group)
	if err != nil {
		return 0, err
	}
	sp := fsm.Splitter{GroupOf: n.GroupOfKey}
	parts, logTime, err := sp.Split(states)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: states: %w", ErrConfig, err)
	case sp.Skipped > 0:
		return 0, fmt.Errorf("%w: the slot table is not known here yet", ErrNotReady)
	case len(parts) > 1 || len(parts) == 1 && parts[group] == nil:
		return 0, fmt.Errorf("%s: %w: states: they hold keys of other groups (split them again by the slot table)", shardName(group), ErrMoved)
	case sp.Keys == 0:
		return 0, nil
	}
	if err := n.CheckRestoreTime(shardName(group)+": states", logTime); err != nil {
		return 0, err
	}
	r.fast.drain()
	// Applies never check --max-key-states, --max-state-mib or one slot's
	// bound (the leader vets what it proposes): a restore beyond them went
	// through, and the group then refused every check of a new key until
	// restored states expired (or a slot could not move).
	most := fsm.Room{States: n.cfg.MaxKeyStates, Bytes: n.cfg.MaxStateBytes}
	held, fullest, err := r.fsm.HeldAfterRestore(parts[group])
	if err != nil {
		return 0, fmt.Errorf("%w: states: %w", ErrConfig, err)
	}
	switch {
	case fullest > fsm.MaxSlotBytes:
		return 0, fmt.Errorf("%s: %w: restoring the states of %d keys would make a slot's states hold %d bytes, over the %d bytes one slot may hold (the most a slot moves with; every key of a colocated policy is in one slot)",
			shardName(group), ErrFull, sp.Keys, fullest, fsm.MaxSlotBytes)
	case most.States > 0 && held.States > most.States:
		return 0, fmt.Errorf("%s: %w: restoring the states of %d keys would make the group hold %d key states, over --max-key-states (%d): "+
			"raise it on every node (0: no bound), or restore into a cluster of more groups", shardName(group), ErrFull, sp.Keys, held.States, most.States)
	case most.Bytes > 0 && held.Bytes > most.Bytes:
		return 0, fmt.Errorf("%s: %w: restoring the states of %d keys would make the group's states hold %d bytes, over --max-state-mib (%d bytes): "+
			"raise it on every node (0: no bound), or restore into a cluster of more groups", shardName(group), ErrFull, sp.Keys, held.Bytes, most.Bytes)
	}
	if err := n.applyShard(ctx, r, fsm.EncodeRestore(states)); err != nil {
		if errors.Is(err, fsm.ErrNotOwned) {
			return 0, fmt.Errorf("%s: %w: %w", shardName(group), ErrMoved, err)
		}
		return 0, err
	}
	return sp.Keys, nil
}

// CheckRestoreTime refuses states of a backup, named what, whose log time
// (Unix nanoseconds) is ahead of this node's clock by more than the
// cluster's clock tolerance (--max-clock-offset; its default when the
// check is off). A restore moves the group's clock to that time, and a
// group's clock never goes back: every check would be stamped with it
// until the wall clocks caught up, so windows would stand still (a key
// denied stays denied) and states of the present would look expired.
// The state machine cannot check this (it never reads a clock), so the
// nodes that take a restore do, before anything is written.
func (n *Node) CheckRestoreTime(what string, logTime int64) error {
	tolerance := n.cfg.MaxClockOffset
	if tolerance <= 0 {
		tolerance = DefaultMaxClockOffset
	}
	// The later of the clock and the stamps: stamps held behind a step or
	// a resume must not refuse a backup of the present.
	now := wallclock.Now()
	if s := n.stamp.Now(); s.After(now) {
		now = s
	}
	at := time.Unix(0, logTime)
	if ahead := at.Sub(now); ahead > tolerance {
		return fmt.Errorf("%s: %w: %s, this node's clock %s (%s ahead; the cluster's clock tolerance is %s): "+
			"restored, it would stop the group's clock until then; the backup comes from a cluster whose clocks ran fast, or this node's clock is behind",
			what, ErrTimeAhead, at.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano), ahead.Round(time.Millisecond), tolerance)
	}
	return nil
}
