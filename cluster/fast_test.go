package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// fastPolicy is a fast-consistency policy far from its limit, so every
// check is admitted and the count is exactly the number admitted.
var fastPolicy = &policy.Policy{
	Limits:      []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 1_000_000, Window: int64(24 * time.Hour)}}},
	Consistency: policy.Fast,
}

func testFastConfig() Config {
	return Config{FastFlushInterval: 50 * time.Millisecond, FastMaxPending: 40, CommitTimeout: time.Second}
}

// lanesOf opens a fast lane with cfg on every replica of g; closeLanes
// closes them, before g is closed.
func lanesOf(g *memGroup, cfg Config) []*fastLane {
	lanes := make([]*fastLane, len(g.rafts))
	for i := range lanes {
		lanes[i] = newFastLane(g.rafts[i], g.shards[i], cfg, nil, func() error { return &NotLeaderError{Group: "shard-0"} })
	}
	return lanes
}

func closeLanes(lanes []*fastLane) {
	for _, l := range lanes {
		l.close()
	}
}

// fastLoad sends fast checks of key "k", cost 1, to whichever replica of
// g leads, from 4 workers a millisecond apart, until halt; it counts the
// checks admitted and those refused.
type fastLoad struct {
	admitted, refused atomic.Int64
	stop              chan struct{}
	wg                sync.WaitGroup
}

func startFastLoad(g *memGroup, lanes []*fastLane) *fastLoad {
	l := &fastLoad{stop: make(chan struct{})}
	for range 4 {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				if li := g.leader(); li >= 0 {
					res, err := lanes[li].decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1})
					switch {
					case err != nil:
						l.refused.Add(1)
					case res.Allowed:
						l.admitted.Add(1)
					}
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	return l
}

// halt stops the load and waits for its workers.
func (l *fastLoad) halt() {
	close(l.stop)
	l.wg.Wait()
}

// committedCount reads key's count on the group's leader through the log.
func committedCount(t *testing.T, g *memGroup, key string) int64 {
	t.Helper()
	li := g.waitLeader(t)
	f := g.rafts[li].Apply(fsm.EncodeAllow(nil, time.Now().UnixNano(), []fsm.Check{{Key: key, Policy: fastPolicy, Cost: 0}}), time.Second)
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	res := f.Response().([]policy.Result)[0]
	return fastPolicy.Limits[0].Limit.Limit - res.Remaining
}

// With no failover, fast mode is exact: a leadership transfer under load
// hands every answered decision to the new leader. Before, the reconciler
// drained the lane without refusing new checks, and what was answered
// between the drain and the transfer was lost (4, 0, 25, 13 and 312
// admissions in five transfers of a fault run).
func TestFastHandOverLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newMemGroup(t, 3)
		defer g.close()
		lanes := lanesOf(g, testFastConfig())
		defer closeLanes(lanes)
		load := startFastLoad(g, lanes)
		for range 5 {
			time.Sleep(300 * time.Millisecond)
			li := g.waitLeader(t)
			// A transfer takes time (the target catches up, then wins an
			// election); fast checks keep arriving meanwhile.
			transfer := func() error {
				time.Sleep(20 * time.Millisecond)
				return g.rafts[li].LeadershipTransfer().Error()
			}
			if err := lanes[li].handOver(transfer); err != nil {
				t.Fatalf("hand over: %v", err)
			}
		}
		time.Sleep(300 * time.Millisecond)
		load.halt()
		for _, l := range lanes {
			l.drain()
		}
		if got, want := committedCount(t, g, "k"), load.admitted.Load(); got != want {
			t.Errorf("committed count %d after 5 transfers, want the %d admitted (%d refused while handing over)", got, want, load.refused.Load())
		}
		if load.admitted.Load() == 0 {
			t.Fatal("nothing admitted: the test checked nothing")
		}
	})
}

// handOver makes no transfer when the lane cannot drain, and accepts fast
// checks again afterwards while it still leads.
func TestFastHandOverResumesWhenTransferFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newMemGroup(t, 3)
		defer g.close()
		li := g.leader()
		lane := leaderLane(g, li, testFastConfig())
		defer lane.close()
		if _, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); err != nil {
			t.Fatal(err)
		}
		var during error
		err := lane.handOver(func() error {
			_, during = lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1})
			return ErrUnavailable // the transfer failed: still the leader
		})
		if err == nil {
			t.Fatal("a failed transfer reported success")
		}
		if during == nil {
			t.Error("a fast check was answered while the lane was handing over")
		}
		if _, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); err != nil {
			t.Errorf("still the leader after a failed transfer, yet fast checks are refused: %v", err)
		}
		lane.drain()
		if got := committedCount(t, g, "k"); got != 2 {
			t.Errorf("committed %d, want the 2 answered", got)
		}
	})
}

// A lane replicates a batch one interval after its first count, not on a
// ticker: an idle shard's lane never wakes, and no count waits longer
// than the interval.
func TestFastLaneFlushesAnIntervalAfterTheFirstCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newMemGroup(t, 3)
		defer g.close()
		li := g.leader()
		cfg := testFastConfig()
		lane := leaderLane(g, li, cfg)
		defer lane.close()
		var want int64
		for _, idle := range []time.Duration{time.Second, 17 * time.Millisecond, 333 * time.Millisecond} {
			time.Sleep(idle) // a ticker's phase would be anywhere by now
			for range 3 {
				if _, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond) // later counts join the batch
			}
			time.Sleep(cfg.FastFlushInterval - 16*time.Millisecond)
			if got := committedCount(t, g, "k"); got != want {
				t.Fatalf("after %s idle: %d committed 1ms before the interval since the first count, want %d", idle, got, want)
			}
			time.Sleep(2 * time.Millisecond)
			synctest.Wait()
			if want += 3; committedCount(t, g, "k") != want {
				t.Fatalf("after %s idle: %d committed 1ms past the interval since the first count, want %d", idle, committedCount(t, g, "k"), want)
			}
		}
	})
}

// Two hand-overs may overlap (a slot freeze's drain, and a shutdown's
// leadership transfer, which refuses fast checks for good first): the one
// that ends first must not let fast checks in while the other's transfer
// runs, or what they count is lost with the leadership. Before, each
// restored the flag it found, and the freeze's end reopened the lane.
func TestFastOverlappingHandOvers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true)
		close(rig.g.gate)
		lane := newFastLane(rig.r, rig.g.shard, testFastConfig(), nil, func() error { return rig.nl })
		ctx := context.Background()
		freezeGo, freezeDone := make(chan struct{}), make(chan error, 1)
		go func() { freezeDone <- lane.handOver(func() error { <-freezeGo; return nil }) }()
		synctest.Wait()
		transferGo, transferDone := make(chan struct{}), make(chan error, 1)
		go func() {
			lane.refuse()
			transferDone <- lane.handOver(func() error { <-transferGo; return nil })
		}()
		synctest.Wait()
		close(freezeGo)
		if err := <-freezeDone; err != nil {
			t.Fatal(err)
		}
		if _, err := lane.decide(ctx, fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); err == nil {
			t.Errorf("a fast check was answered during the other hand-over's transfer (pending %d)", lane.pendingCost())
		}
		close(transferGo)
		if err := <-transferDone; err != nil {
			t.Fatal(err)
		}
		if _, err := lane.decide(ctx, fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); err == nil {
			t.Error("fast checks answered again after refuse")
		}
		lane.close()
		rig.stop(t)
	})
}

// A full lane (its pending cost at --fast-max-pending or more) makes a
// check wait for its batch to commit, whatever the check costs; under the
// bound, a check is let in whatever it costs (waiting for room for all of
// a costly check would starve it behind cheaper ones under load). So the
// pending cost stays under the bound plus one check's cost, and a failover
// loses less than twice that (the pending cost and a batch in flight), as
// the README says.
func TestFastLaneBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Commits stall until the gate opens; the bound is 40.
		rig := newBatcherRig(t, 10, true)
		lane := newFastLane(rig.r, rig.g.shard, testFastConfig(), nil, func() error { return rig.nl })
		ctx := context.Background()
		decide := func(cost int64) error {
			cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			_, err := lane.decide(cctx, fsm.Check{Key: "k", Policy: fastPolicy, Cost: cost})
			return err
		}
		// 30, then 35 (pending 65: under 40 + 35), which fills the lane: a
		// batch of 65 goes out, and stalls.
		for _, cost := range []int64{30, 35} {
			if err := decide(cost); err != nil {
				t.Fatal(err)
			}
		}
		// The lane is free again while that batch is in flight: 39 more, then
		// 20 (pending 59, under 40 + 20).
		for _, cost := range []int64{39, 20} {
			if err := decide(cost); err != nil {
				t.Fatalf("%d with room in the lane: %v", cost, err)
			}
		}
		if got := lane.pendingCost(); got != 59+65 {
			t.Errorf("answered and not committed %d, want 59 pending and 65 in flight", got)
		}
		// Full, and a batch in flight: every check waits, the cheapest too.
		if err := decide(1); err == nil {
			t.Errorf("a check was answered with the lane full and a batch in flight: pending %d", lane.pendingCost())
		}
		close(rig.g.gate)
		lane.drain()
		lane.close()
		rig.stop(t)
	})
}

// A leader cut off from its followers with fast decisions answered and
// not committed, then killed, loses at most what it answered and did not
// commit: under 2 × (--fast-max-pending + the largest cost of one check),
// the README's bound, however long the flush interval and however long it
// goes on believing it leads (its lease), because a full lane with a batch
// stuck in flight answers nothing more. Everything else answered, by the
// old leader and the new one, is counted.
func TestFastFailoverLosesWithinTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newMemGroup(t, 3)
		defer g.close()
		cfg := testFastConfig()
		cfg.FastFlushInterval = time.Hour // only a full lane flushes
		const maxCost = 3
		lanes := lanesOf(g, cfg)
		defer closeLanes(lanes)
		// Callers stay with the old leader while it believes it leads.
		var pinned atomic.Int64
		pinned.Store(-1)
		route := func() int {
			if p := int(pinned.Load()); p >= 0 && g.rafts[p].State() == raft.Leader {
				return p
			}
			return g.leader()
		}
		var admitted atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for n := int64(w); ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					if li := route(); li >= 0 {
						cost := 1 + n%maxCost
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
						res, err := lanes[li].decide(ctx, fsm.Check{Key: "k", Policy: fastPolicy, Cost: cost})
						cancel()
						if err == nil && res.Allowed {
							admitted.Add(cost)
						}
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		time.Sleep(200 * time.Millisecond)
		old := g.waitLeader(t)
		pinned.Store(int64(old))
		for lanes[old].pendingCost() < cfg.FastMaxPending/2 {
			time.Sleep(time.Millisecond)
		}
		// Cut off: its batches stall, and it answers until its lease ends.
		g.trans[old].DisconnectAll()
		for i := range g.trans {
			if i != old {
				g.trans[i].Disconnect(g.trans[old].LocalAddr())
			}
		}
		answeredBefore := admitted.Load()
		for g.rafts[old].State() == raft.Leader {
			time.Sleep(time.Millisecond)
		}
		_ = g.rafts[old].Shutdown().Error() // then kill -9: no drain, no hand-over
		answeredByOld := admitted.Load()
		for g.leader() < 0 {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // the new leader answers
		close(stop)
		wg.Wait()
		for i, l := range lanes {
			if i != old {
				l.drain()
			}
		}
		if answeredByOld == answeredBefore || admitted.Load() == answeredByOld {
			t.Fatalf("admitted %d before the partition, %d until the old leader stepped down, %d in all: the test checked nothing",
				answeredBefore, answeredByOld, admitted.Load())
		}
		bound := 2 * (cfg.FastMaxPending + maxCost)
		lost := admitted.Load() - committedCount(t, g, "k")
		if lost <= 0 || lost >= bound {
			t.Errorf("a failover lost %d of the %d admitted, want some and under the bound %d", lost, admitted.Load(), bound)
		}
	})
}

// A fast peek (cost 0) counts nothing, so it writes nothing: no Raft
// entry, no room taken in the lane, no pending state that would make a
// strict check of its key wait (mixGuard): policy.Count makes a peek's
// outcome Denied, which the lane does not replicate.
func TestFastPeekWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newMemGroup(t, 3)
		defer g.close()
		li := g.leader()
		cfg := testFastConfig()
		lane := leaderLane(g, li, cfg)
		defer lane.close()
		// The lane's first decision waits for its term's barrier, an entry.
		if _, err := lane.decide(context.Background(), fsm.Check{Key: "warm", Policy: fastPolicy, Cost: 1}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * cfg.FastFlushInterval)
		synctest.Wait()
		before := g.rafts[li].LastIndex()
		for range 5 {
			res, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 0})
			if err != nil || !res.Allowed {
				t.Fatalf("peek: %+v, %v", res, err)
			}
		}
		if n := g.shards[li].FastPending(); n != 0 {
			t.Fatalf("%d overlay states pending after peeks", n)
		}
		lane.mu.Lock()
		cost, hits := lane.cost, len(lane.pending)
		lane.mu.Unlock()
		if cost != 0 || hits != 0 {
			t.Fatalf("peeks hold %d hits of cost %d in the lane", hits, cost)
		}
		time.Sleep(3 * cfg.FastFlushInterval)
		synctest.Wait()
		if after := g.rafts[li].LastIndex(); after != before {
			t.Fatalf("peeks wrote %d Raft entries", after-before)
		}
		// A peek sees the decisions pending before it, and a count after
		// peeks is counted once.
		if _, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); err != nil {
			t.Fatal(err)
		}
		peek, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 0})
		if err != nil || peek.Remaining != fastPolicy.Limits[0].Limit.Limit-1 {
			t.Fatalf("peek after a count: %+v, %v", peek, err)
		}
		time.Sleep(3 * cfg.FastFlushInterval)
		synctest.Wait()
		if got := committedCount(t, g, "k"); got != 1 {
			t.Fatalf("%d committed, want 1", got)
		}
	})
}

// leaderLane is a fast lane of g's replica li (its leader), answering
// NotLeader as shard-0 when it cannot take a check.
func leaderLane(g *memGroup, li int, cfg Config) *fastLane {
	return newFastLane(g.rafts[li], g.shards[li], cfg, nil, func() error { return &NotLeaderError{Group: "shard-0"} })
}

// A fast check that found this replica leading just before a leadership
// transfer, and takes the lane only once the transfer is over, is refused:
// the replica no longer leads, and a decision answered from its overlay
// would never commit, on a hand-over that promises to lose nothing. The
// lane's term is still the old one (a new term's barrier moves it), so the
// term check alone let it through.
func TestFastCheckEnteringAfterHandOverIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newMemGroup(t, 3)
		defer g.close()
		li := g.leader()
		lane := leaderLane(g, li, testFastConfig())
		defer lane.close()
		ctx := context.Background()
		if _, err := lane.decide(ctx, fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); err != nil {
			t.Fatal(err)
		}
		// The check's first step: this replica leads in term.
		term, err := lane.leading(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The whole hand-over runs before the check takes the lane.
		if err := lane.handOver(func() error { return g.rafts[li].LeadershipTransfer().Error() }); err != nil {
			t.Fatalf("hand over: %v", err)
		}
		if err := lane.enter(ctx, term, []string{"k"}); err == nil {
			lane.mu.Unlock()
			t.Fatal("a fast check was let in after its replica handed its leadership over")
		}
		if got := committedCount(t, g, "k"); got != 1 {
			t.Errorf("committed %d, want the 1 answered before the hand-over", got)
		}
	})
}

// A check delayed between leading and entering (a starved goroutine) while
// its replica lost the leadership and won it back finds the lane's term
// still its own, the new term's barrier not passed: it is refused, not
// decided on a state that may lack what the leader between committed.
func TestFastCheckOfAnEarlierTermIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newMemGroup(t, 3)
		defer g.close()
		li := g.leader()
		lane := leaderLane(g, li, testFastConfig())
		defer lane.close()
		ctx := context.Background()
		term, err := lane.leading(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.rafts[li].LeadershipTransfer().Error(); err != nil {
			t.Fatalf("transfer away: %v", err)
		}
		other := g.waitLeader(t)
		self := raft.ServerID(fmt.Sprintf("r%d", li))
		if err := g.rafts[other].LeadershipTransferToServer(self, raft.ServerAddress(self)).Error(); err != nil {
			t.Fatalf("transfer back: %v", err)
		}
		for g.rafts[li].State() != raft.Leader {
			time.Sleep(10 * time.Millisecond)
		}
		if now := g.rafts[li].CurrentTerm(); now <= term+1 {
			t.Fatalf("term %d after two transfers from %d", now, term)
		}
		if err := lane.enter(ctx, term, []string{"k"}); err == nil {
			lane.mu.Unlock()
			t.Fatal("a fast check of an earlier term was let in")
		}
	})
}
