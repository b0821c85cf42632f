package cluster

import (
	"math/bits"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Log retention by bytes. hashicorp/raft keeps a group's log by entries:
// it snapshots once 4,096 entries follow the last snapshot and keeps
// 2,048 after it, whatever they hold. A shard entry carries up to 4,096
// checks, keys included, so under checks of 500-byte keys a node's log
// reached 2.4 GB before its first snapshot, kept it while idle (no entry,
// so no snapshot), and a restart replaying it peaked at 2.5 GB of memory.
// A node now sets each group's counts from the bytes its entries hold
// (planRetention), and snapshots a group whose log grew past its budget
// while idle.

const (
	// retainEvery is how often a node looks at its groups' logs.
	retainEvery = 5 * time.Second
	// maxTrailing and maxThreshold are raft's counts for small entries
	// (groupOptions' defaults); minTrailing and minThreshold the least
	// the bytes may bring them to: a follower a few entries behind still
	// catches up from the log, not by a whole snapshot, and snapshots
	// stay a few entries apart.
	maxTrailing, minTrailing   = 2048, 16
	maxThreshold, minThreshold = 4096, 32
)

// retention is a group's plan: raft's TrailingLogs and SnapshotThreshold,
// and whether to snapshot now.
type retention struct {
	trailing, threshold uint64
	snapshot            bool
}

// planRetention plans the log retention of a group whose log holds
// entries entries of logBytes bytes and whose states hold stateBytes,
// under a budget of bytes (--raft-log-mib). The log may hold the larger
// of the budget and the states (a snapshot writes every state: snapshots
// more often than the log grows by the states' size write more than they
// save): its entries since a snapshot up to that, and half of it kept
// after one, in counts from the entries' mean size, as powers of two so
// that a plan changes only when the size does by half or double. A log
// past one and a half times that is snapshotted now, if the compaction
// after it would free half of it at least (a log of a few huge entries is
// what trailing keeps: snapshotting it again would free nothing): raft
// looks at its count only every SnapshotInterval (20 to 40 s), in which a
// busy group writes far more, and never while the group is idle (after a
// burst). budget <= 0: raft's counts, as releases before.
func planRetention(budget, stateBytes, logBytes int64, entries int) retention {
	plan := retention{trailing: maxTrailing, threshold: maxThreshold}
	if budget <= 0 || entries == 0 || logBytes <= 0 {
		return plan
	}
	b := max(budget, stateBytes)
	mean := max(logBytes/int64(entries), 1)
	plan.threshold = floorPow2(clamp(b/mean, minThreshold, maxThreshold))
	plan.trailing = floorPow2(clamp(b/2/mean, minTrailing, maxTrailing))
	kept := min(int64(plan.trailing), int64(entries)) * mean
	plan.snapshot = logBytes > b+b/2 && logBytes-kept >= b/2
	return plan
}

func clamp(v, lo, hi int64) uint64 { return uint64(min(max(v, lo), hi)) }

// floorPow2 is the largest power of two at most v (v >= 1).
func floorPow2(v uint64) uint64 { return 1 << (bits.Len64(v) - 1) }

// sizedLog is a group's log that can tell its size (raftlog.Group).
type sizedLog interface {
	Size() (entries int, bytes int64)
}

// retainer runs one group's retention (Group.retain).
type retainer struct {
	raft *raft.Raft
	pace *pacer
	log  sizedLog

	mu sync.Mutex
	// running is set while a snapshot it asked for runs: raft takes one
	// at a time and makes a caller of Snapshot wait for the one under way
	// (its own, every 20 to 40 s, included), so the call is made in the
	// background, and one at a time.
	running bool
	// at is the index the group had applied when its last snapshot was
	// asked for: raft takes another at the same index if asked (it
	// refuses only an empty log), so nothing is asked before the group
	// applied more.
	at uint64
	// closed: the group is closing, and no snapshot starts (so wg is
	// never added to while close waits on it).
	closed bool
	wg     sync.WaitGroup // the snapshot asked for, if one runs
}

// close waits for the snapshot asked for, if one runs (raft refuses it
// once shut down), and starts no other.
func (rt *retainer) close() {
	rt.mu.Lock()
	rt.closed = true
	rt.mu.Unlock()
	rt.wg.Wait()
}

// step applies the plan for a group whose states hold stateBytes, under
// budget; stop closed: nothing more is started (the node is stopping).
func (rt *retainer) step(budget, stateBytes int64, stop <-chan struct{}) {
	entries, bytes := rt.log.Size()
	plan := planRetention(budget, stateBytes, bytes, entries)
	rt.pace.retain(plan.trailing, plan.threshold)
	if !plan.snapshot {
		return
	}
	select {
	case <-stop:
		return
	default:
	}
	applied := rt.raft.AppliedIndex()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed || rt.running || applied <= rt.at {
		return
	}
	rt.running, rt.at = true, applied
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		_ = rt.raft.Snapshot().Error() // refused once raft shuts down
		rt.mu.Lock()
		rt.running = false
		rt.mu.Unlock()
	}()
}

// retainAll applies each local shard group's plan (every retainEvery).
func (n *Node) retainAll() {
	if n.cfg.RaftLogBytes <= 0 {
		return
	}
	for _, r := range n.replicas() {
		if rt := r.group.keep; rt != nil {
			rt.step(n.cfg.RaftLogBytes, r.fsm.Stats().Bytes, n.stop)
		}
	}
}
