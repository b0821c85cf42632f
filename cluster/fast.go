package cluster

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
)

// fastLane answers a shard's fast-consistency checks on its leader at once,
// from the FSM's overlay, and replicates what they counted in batches: every
// FastFlushInterval, or sooner once FastMaxPending cost is waiting. One batch
// is in flight at a time, and a check waits while FastMaxPending cost is
// already waiting behind it, so at any moment at most 2×FastMaxPending cost
// has been answered but not committed: that is all a leader failover can
// lose, and so the most a key can be admitted beyond its limit.
type fastLane struct {
	r          *raft.Raft
	shard      *fsm.Shard
	interval   time.Duration
	maxPending int64
	timeout    time.Duration
	notLeader  func() error

	mu       sync.Mutex
	room     *sync.Cond // signalled when pending cost drops
	term     uint64     // the leadership term the pending hits belong to
	pending  []fastHit
	cost     int64 // cost of pending
	inflight bool
	stopped  bool

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

type fastHit struct {
	hit fsm.Hit
	gen uint64
}

func newFastLane(r *raft.Raft, shard *fsm.Shard, cfg Config, notLeader func() error) *fastLane {
	f := &fastLane{
		r: r, shard: shard, interval: cfg.FastFlushInterval, maxPending: cfg.FastMaxPending,
		timeout: cfg.CommitTimeout, notLeader: notLeader,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	f.room = sync.NewCond(&f.mu)
	go f.loop()
	return f
}

// decide answers one fast check at once.
func (f *fastLane) decide(c fsm.Check) (policy.Result, error) {
	if f.r.State() != raft.Leader {
		return policy.Result{}, f.notLeader()
	}
	term := f.r.CurrentTerm()
	f.mu.Lock()
	defer f.mu.Unlock()
	if term != f.term {
		// A new leadership: whatever an earlier term answered and did not
		// commit is gone, and so is its overlay.
		f.shard.ResetFast()
		f.pending, f.cost, f.term = nil, 0, term
	}
	for f.cost >= f.maxPending && !f.stopped {
		f.nudge()
		f.room.Wait()
	}
	if f.stopped {
		return policy.Result{}, f.notLeader()
	}
	now := time.Now().UnixNano()
	res, gen := f.shard.FastEval(c.Policy, c.Key, c.Cost, now, c.Elastic)
	if res.Outcome != policy.Denied {
		f.pending = append(f.pending, fastHit{fsm.Hit{Key: c.Key, Policy: c.Policy, Cost: c.Cost, Time: now, Outcome: res.Outcome}, gen})
		if f.cost += max(c.Cost, 1); f.cost >= f.maxPending {
			f.nudge()
		}
	}
	return res, nil
}

func (f *fastLane) nudge() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *fastLane) loop() {
	defer close(f.done)
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		case <-f.kick:
		}
		if f.flush() {
			f.nudge() // more gathered while that batch committed
		}
	}
}

// flush replicates the pending hits as one entry and waits for it; it
// reports whether more hits are pending.
func (f *fastLane) flush() bool {
	f.mu.Lock()
	if f.inflight || len(f.pending) == 0 {
		f.mu.Unlock()
		return false
	}
	batch := f.pending
	f.pending, f.cost, f.inflight = nil, 0, true
	f.room.Broadcast()
	f.mu.Unlock()

	hits := make([]fsm.Hit, len(batch))
	for i := range batch {
		hits[i] = batch[i].hit
	}
	err := f.r.Apply(fsm.EncodeHits(nil, time.Now().UnixNano(), hits), f.timeout).Error()
	if err == nil {
		for _, h := range batch {
			f.shard.ReleaseFast(h.hit.Policy, h.hit.Key, h.gen)
		}
	}
	// On failure leadership is being lost: the next term starts with a
	// fresh overlay, and these hits count only if the new leader commits
	// them.
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight = false
	f.room.Broadcast()
	return len(f.pending) > 0
}

// drain flushes everything pending now and waits for it, so a reset that
// follows is not undone by hits answered before it.
// Checks keep arriving meanwhile, so it gives up after a few rounds.
func (f *fastLane) drain() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for round := 0; round < 4 && (f.inflight || len(f.pending) > 0); {
		if f.inflight {
			f.room.Wait()
			continue
		}
		f.mu.Unlock()
		f.flush()
		f.mu.Lock()
		round++
	}
}

// close stops the lane; checks waiting for room are refused as not-leader.
func (f *fastLane) close() {
	f.mu.Lock()
	f.stopped = true
	f.room.Broadcast()
	f.mu.Unlock()
	close(f.stop)
	<-f.done
}
