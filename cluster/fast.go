package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/wallclock"
)

// fastLane answers a shard's fast-consistency checks on its leader at once,
// from the FSM's overlay, and replicates what they counted in batches: a
// FastFlushInterval after the first hit of a batch was counted, or sooner
// once FastMaxPending cost is waiting. One batch is in flight at a time,
// and a check waits while FastMaxPending cost is already waiting behind
// it, so at any moment at most 2×FastMaxPending cost has been answered but
// not committed: that is all a leader failover can lose, and so the most a
// key can be admitted beyond its limit.
type fastLane struct {
	r          *raft.Raft
	shard      *fsm.Shard
	interval   time.Duration
	maxPending int64
	timeout    time.Duration
	notLeader  func() error
	clock      *wallclock.Guard // stamps the checks (nil: the system clock)

	mu   sync.Mutex
	room *sync.Cond // signalled when pending cost drops or state changes (wake)
	// roomCh is closed and replaced at each wake: a caller waiting for
	// room selects on it and its own context, so one giving up wakes
	// itself alone. (Woken through room by a context.AfterFunc, every
	// caller that gave up woke every other one waiting: 4,000 callers of
	// a stalled lane giving up one after another took 3.3 s of the lane's
	// lock, growing with the square of their number.)
	roomCh   chan struct{}
	term     uint64 // the leadership term pending hits belong to
	ready    uint64 // the term whose barrier has passed
	pending  []fastHit
	cost     int64 // cost of pending
	inflight bool
	flying   int64 // cost of the batch in flight
	// retry: pending holds a batch raft refused before its log; retrying:
	// the batch in flight does. No check is let in while one is retried.
	retry, retrying bool
	refusals        int64 // batches raft refused before its log, ever
	// New fast checks are refused (as not-leader) while a hand-over runs
	// (handing counts them: two may overlap, a drain for a freeze and one
	// for a shutdown's transfer) and for good once refused.
	handing int
	refused bool
	// passing is the leadership barrier under way, if any.
	passing *fastBarrier

	// mix keeps strict and fast decisions of the same states in step
	// (mixed.go). Taken after mu, before the shard's lock.
	mix mixGuard

	kick chan struct{} // flush now
	arm  chan struct{} // the first hit waits: flush within interval
	stop chan struct{}
	done chan struct{}
}

type fastHit struct {
	hit fsm.Hit
	gen uint64
}

// fastBarrier is a leadership barrier of term under way: its callers wait
// for done (no longer than their own deadlines), then read err.
type fastBarrier struct {
	term uint64
	done chan struct{}
	err  error
}

func newFastLane(r *raft.Raft, shard *fsm.Shard, cfg Config, clock *wallclock.Guard, notLeader func() error) *fastLane {
	f := &fastLane{
		r: r, shard: shard, clock: clock, interval: cfg.FastFlushInterval, maxPending: cfg.FastMaxPending,
		timeout: cfg.CommitTimeout, notLeader: notLeader,
		kick: make(chan struct{}, 1), arm: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	f.room = sync.NewCond(&f.mu)
	f.roomCh = make(chan struct{})
	go f.loop()
	return f
}

// decide answers one fast check at once; a full lane waits for room no
// longer than ctx. Errors mean nothing was counted; errTakeStrict, that
// the check must go through the log (mixGuard).
func (f *fastLane) decide(ctx context.Context, c fsm.Check) (policy.Result, error) {
	if err := f.lock(ctx, c.Key); err != nil {
		return policy.Result{}, err
	}
	defer f.mu.Unlock()
	f.mix.mu.Lock()
	if !f.mix.fastAllowed(c.Policy, []string{c.Key}) {
		f.mix.mu.Unlock()
		return policy.Result{}, errTakeStrict
	}
	res, gen, at := f.shard.FastEval(c.Policy, c.Key, c.Cost, f.clock.Now().UnixNano(), c.Elastic)
	f.mix.mu.Unlock()
	if res.Outcome != policy.Denied {
		f.counted(fsm.Hit{Key: c.Key, Policy: c.Policy, Cost: c.Cost, Time: at, Outcome: res.Outcome, Elastic: c.Elastic}, gen)
	}
	return res, nil
}

// decideSet answers the fast checks of one atomic set (fsm.Check.Joined)
// at once, all admitted or none, with one elastic judgment for the set; a
// full lane waits for room no longer than ctx. Errors mean nothing was
// counted; errTakeStrict, that the set must go through the log.
func (f *fastLane) decideSet(ctx context.Context, set []fsm.Check, elastic bool) ([]policy.Result, error) {
	keys, costs := make([]string, len(set)), make([]int64, len(set))
	for i, c := range set {
		keys[i], costs[i] = c.Key, c.Cost
	}
	if err := f.lock(ctx, keys...); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	f.mix.mu.Lock()
	if !f.mix.fastAllowed(set[0].Policy, keys) {
		f.mix.mu.Unlock()
		return nil, errTakeStrict
	}
	res, hits, gen := f.shard.FastEvalSet(set[0].Policy, keys, costs, f.clock.Now().UnixNano(), elastic)
	f.mix.mu.Unlock()
	for _, h := range hits {
		f.counted(h, gen)
	}
	return res, nil
}

// lock takes f.mu for a decision on keys once this replica leads and the
// lane has room (its pending cost is under maxPending), and the shard owns
// every key. On error f.mu is not held and nothing was counted. A check
// is let in whatever its own cost, so the pending cost stays under
// maxPending plus one decision's cost (an atomic set's: its checks'
// summed, README's bound): waiting for room for the whole of a costly
// check would starve it behind cheaper ones under load.
func (f *fastLane) lock(ctx context.Context, keys ...string) error {
	term, err := f.leading(ctx)
	if err != nil {
		return err
	}
	return f.enter(ctx, term, keys)
}

// enter is lock once leading returned term: it takes f.mu, waits for room
// and checks ownership. On error f.mu is not held.
func (f *fastLane) enter(ctx context.Context, term uint64, keys []string) error {
	f.mu.Lock()
	for {
		// The lane's term moves only at a new term's barrier, so it still
		// matches after a hand-over completed between leading and here: a
		// transfer's future answers once raft left the leader state, so
		// reading it under f.mu (handOver ends under it) refuses the check.
		// Raft's term is read too: a caller delayed since leading (a
		// starved goroutine) may find this node leading again in a later
		// term whose barrier has not passed, the lane's term still its own,
		// and the state without what the leader between committed.
		if f.refused || f.handing > 0 || f.term != term || f.r.State() != raft.Leader || f.r.CurrentTerm() != term {
			f.mu.Unlock()
			return f.notLeader()
		}
		// A batch raft refused before its log (its queue full) comes back
		// to pending with what was gathered meanwhile and is sent again
		// whole: were checks let in behind it, every such round would add
		// a lane's worth to what a failover loses.
		if f.cost < f.maxPending && !f.retrying {
			break
		}
		// A full lane waits for its batch to commit: no longer than the
		// caller.
		if err := ctx.Err(); err != nil {
			f.mu.Unlock()
			return fmt.Errorf("%w: fast lane full: %w", ErrNoLeader, err) // nothing counted
		}
		f.nudge()
		woken := f.roomCh
		f.mu.Unlock()
		select {
		case <-woken:
		case <-ctx.Done():
		}
		f.mu.Lock()
		if f.r.State() != raft.Leader || f.r.CurrentTerm() != term {
			f.mu.Unlock()
			return f.notLeader()
		}
	}
	for _, k := range keys {
		if !f.shard.Owns(k) {
			f.mu.Unlock()
			// Frozen by a move (answered only once the freeze drained this
			// lane), or not imported yet: nothing counted, routed again.
			return fmt.Errorf("%w (fast)", ErrMoved)
		}
	}
	return nil
}

// counted queues a decided hit that counts for the log. f.mu is held.
func (f *fastLane) counted(h fsm.Hit, gen uint64) {
	first := len(f.pending) == 0
	f.pending = append(f.pending, fastHit{h, gen})
	if f.cost += max(h.Cost, 1); f.cost >= f.maxPending {
		f.nudge()
	} else if first {
		signal(f.arm)
	}
}

// leading returns the current term if this replica leads the shard and may
// answer from memory. The first time in a term it waits for a Raft barrier:
// a new leader's state machine may not have applied everything the former
// leader committed (and answered) yet, and an overlay built on it would
// forget those counts. One barrier runs at a time, and callers wait for it
// no longer than ctx: a barrier that does not pass (the state machine is
// behind, or commits stall while the followers still answer heartbeats)
// must not hold them past --leader-wait.
func (f *fastLane) leading(ctx context.Context) (uint64, error) {
	if f.r.State() != raft.Leader {
		return 0, f.notLeader()
	}
	term := f.r.CurrentTerm()
	f.mu.Lock()
	switch {
	case f.ready == term:
		f.mu.Unlock()
		return term, nil
	case term < f.term:
		f.mu.Unlock()
		return 0, f.notLeader()
	}
	b := f.passing
	if b == nil || b.term != term {
		b = &fastBarrier{term: term, done: make(chan struct{})}
		f.passing = b
		go f.pass(b)
	}
	f.mu.Unlock()
	select {
	case <-b.done:
	case <-ctx.Done():
		// Nothing was counted: safe to retry, here or elsewhere.
		return 0, fmt.Errorf("%w: leadership barrier: %w", ErrNoLeader, ctx.Err())
	}
	if b.err != nil {
		return 0, b.err
	}
	return term, nil
}

// pass runs b's barrier and, once it passed while this replica still leads
// in b's term, lets the lane answer in that term.
func (f *fastLane) pass(b *fastBarrier) {
	defer close(b.done)
	err := f.r.Barrier(f.timeout).Error()
	switch {
	case errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost):
		b.err = f.notLeader()
	case err != nil:
		b.err = fmt.Errorf("%w: leadership barrier: %v", ErrNoLeader, err)
	case f.r.State() != raft.Leader || f.r.CurrentTerm() != b.term:
		b.err = f.notLeader()
	}
	f.mu.Lock()
	if f.passing == b {
		f.passing = nil // the next caller starts another, if this one failed
	}
	stale := b.term < f.term
	if b.err == nil && !stale {
		if b.term > f.term {
			// A new leadership: what an earlier term answered and did not
			// commit is gone, and so is its overlay.
			f.shard.ResetFast()
			f.pending, f.cost, f.retry, f.term = nil, 0, false, b.term
			f.wake()
		}
		f.ready = b.term
	}
	f.mu.Unlock()
	if b.err == nil && stale {
		b.err = f.notLeader()
	}
}

// pendingCost is the cost answered and not yet committed.
func (f *fastLane) pendingCost() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cost + f.flying
}

func (f *fastLane) nudge() { signal(f.kick) }

// signal sends on ch, a channel of one slot, unless a signal waits there.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (f *fastLane) loop() {
	defer close(f.done)
	// The timer runs only while hits wait, so an idle shard's lane never
	// wakes (a ticker would, every interval, on every replica).
	t := time.NewTimer(f.interval)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-f.arm:
			t.Reset(f.interval)
			continue
		case <-t.C:
		case <-f.kick:
		}
		if !f.flush() {
			continue
		}
		if f.retried() {
			// Raft refused the batch before its log: its queue is full, or
			// a leadership transfer runs (refused at once, for as long as
			// the target takes to answer). Try again shortly, not in a
			// tight loop that waiting callers' nudges would keep going.
			select {
			case <-f.stop:
				return
			case <-time.After(retryPause):
			}
		}
		f.nudge() // more gathered while that batch committed, or put back
	}
}

// retryPause is how long the lane waits before sending again a batch raft
// refused before its log.
const retryPause = 10 * time.Millisecond

// retried reports whether pending holds a batch raft refused.
func (f *fastLane) retried() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.retry
}

// flush replicates the pending hits as one entry and waits for it; it
// reports whether more hits are pending.
func (f *fastLane) flush() bool {
	f.mu.Lock()
	if f.inflight || len(f.pending) == 0 {
		f.mu.Unlock()
		return false
	}
	batch, cost, term := f.pending, f.cost, f.term
	f.pending, f.cost, f.inflight, f.flying = nil, 0, true, cost
	f.retrying, f.retry = f.retry, false
	f.wake()
	f.mu.Unlock()

	hits := make([]fsm.Hit, len(batch))
	for i := range batch {
		hits[i] = batch[i].hit
	}
	af := f.r.Apply(fsm.EncodeHits(nil, f.clock.Now().UnixNano(), hits), f.timeout)
	err := af.Error()
	if err == nil {
		if rerr, ok := af.Response().(error); ok {
			// Committed, but every replica refused the entry: nothing of
			// it was counted. Entries are validated before they are
			// written, so this is a bug; say so rather than lose counts
			// silently.
			err = fmt.Errorf("%w: fast batch refused by the state machine: %w", ErrUnavailable, rerr)
		}
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight, f.flying, f.retrying = false, 0, false
	f.wake()
	switch {
	case err == nil:
		for _, h := range batch {
			f.shard.ReleaseFast(h.hit.Policy, h.hit.Key, h.gen)
		}
	case notAppended(err) && f.term == term && f.r.State() == raft.Leader && f.r.CurrentTerm() == term:
		// Refused before it reached the log, and still the leader of the
		// same term: send it again with the next batch.
		f.pending, f.cost, f.retry = append(batch, f.pending...), f.cost+cost, true
		f.refusals++
	case f.term == term:
		// Leadership is going, or the outcome is unknown: the overlay can
		// no longer be trusted. Whatever did not commit is lost (the bound).
		f.shard.ResetFast()
		f.pending, f.cost, f.retry = nil, 0, false
	}
	return len(f.pending) > 0
}

// notAppended reports whether a failed Apply (or Barrier) never reached
// the log: the one rule for raft's errors, shared by the batcher and the
// fast lane.
func notAppended(err error) bool {
	return errors.Is(err, raft.ErrEnqueueTimeout) || errors.Is(err, raft.ErrLeadershipTransferInProgress) ||
		errors.Is(err, raft.ErrNotLeader)
}

// drain flushes everything pending now and waits for it, so a reset that
// follows loses nothing answered before it. Checks keep arriving
// meanwhile, so it gives up after a few rounds; it reports whether nothing
// was left pending. A leadership transfer uses handOver instead, which
// refuses new checks first so that the drain is complete.
func (f *fastLane) drain() bool {
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
	return !f.inflight && len(f.pending) == 0
}

// handOver runs transfer (a leadership transfer) once every fast decision
// answered so far is committed, refusing new fast checks meanwhile (as
// not-leader: nothing counted, the caller retries on the new leader). A
// decision answered after the drain and before the transfer would
// otherwise live only in this leader's overlay and be lost with it. When
// the drain cannot finish, the transfer is not made. Fast checks are
// accepted again afterwards, which matters only if this replica still
// leads (the transfer failed): otherwise its term is over.
func (f *fastLane) handOver(transfer func() error) error {
	f.mu.Lock()
	f.handing++
	f.wake()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.handing--
		f.mu.Unlock()
	}()
	if !f.drain() {
		return fmt.Errorf("%w: fast decisions still pending, transfer postponed", ErrUnavailable)
	}
	return transfer()
}

// dropStale discards the overlay of a replica that no longer leads and has
// nothing left to flush: answers it will never give.
func (f *fastLane) dropStale() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.r.State() != raft.Leader && !f.inflight && len(f.pending) == 0 && f.shard.FastPending() > 0 {
		f.shard.ResetFast()
		f.ready = 0
	}
}

// refuse makes new fast checks fail as not-leader (nothing counted); what
// is pending can still be drained.
func (f *fastLane) refuse() {
	f.mu.Lock()
	f.refused = true
	f.wake()
	f.mu.Unlock()
}

// wake tells everything waiting on the lane (enter's callers, drain) that
// its room or its state changed; the caller holds f.mu.
func (f *fastLane) wake() {
	f.room.Broadcast()
	close(f.roomCh)
	f.roomCh = make(chan struct{})
}

// close stops the lane.
func (f *fastLane) close() {
	f.refuse()
	close(f.stop)
	<-f.done
}
