package cluster

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
)

// A fast check that finds its lane full waits for the batch in flight to
// commit, but no longer than its caller's context: a commit that stalls
// (followers' disks stall while they still answer heartbeats, so the
// leader keeps its lease) must not hold fast callers past --leader-wait,
// where a strict check answers Unavailable; nothing is counted.
func TestFullFastLaneWaitsNoLongerThanItsCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true)
		close(rig.g.gate)
		lane := newFastLane(rig.r, rig.g.shard, testFastConfig(), nil, func() error { return rig.nl })
		if _, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); err != nil {
			t.Fatal(err)
		}
		lane.drain()
		rig.g.gate = make(chan struct{}) // commits stall from now on
		for range 2 {                    // one batch in flight, one full behind it
			if _, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 40}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // --leader-wait
			defer cancel()
			_, err := lane.decide(ctx, fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1})
			done <- err
		}()
		time.Sleep(30 * time.Second) // far past any --leader-wait
		synctest.Wait()
		returned := false
		select {
		case <-done:
			returned = true
		default:
			t.Error("a fast check still waits after 30s of stalled commits: no deadline reaches the lane")
		}
		close(rig.g.gate)
		if !returned {
			<-done
		}
		lane.close()
		rig.stop(t)
	})
}

// A new leader answers fast checks only once a Raft barrier has passed
// (its state machine has applied what the former leader committed). A
// barrier that does not pass (the state machine is behind, or commits
// stall while followers still answer heartbeats, so the leader keeps its
// lease) must not hold fast callers past their deadline (--leader-wait),
// where a strict check answers Unavailable: nothing is counted, and the
// check may go again. Before, the barrier was waited for without a
// deadline, and every other fast check of the group queued behind it.
func TestFastLeadershipBarrierWaitsNoLongerThanItsCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true)
		lane := newFastLane(rig.r, rig.g.shard, testFastConfig(), nil, func() error { return rig.nl })
		// An entry the state machine has yet to apply: the barrier waits
		// behind it.
		stalled := rig.r.Apply(fsm.EncodeTick(time.Now().UnixNano()), time.Second)
		done := make(chan error, 3)
		check := func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // --leader-wait
			defer cancel()
			_, err := lane.decide(ctx, fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1})
			done <- err
		}
		// The first caller starts the barrier; two more come while it is
		// still waited for.
		waiting := 0
		for _, callers := range []int{1, 2} {
			for range callers {
				go check()
			}
			waiting += callers
			time.Sleep(30 * time.Second) // far past any --leader-wait
			synctest.Wait()
			for len(done) > 0 {
				if err := <-done; err == nil {
					t.Error("a fast check was answered before the leadership barrier passed")
				} else if !Retryable(err) {
					t.Errorf("a fast check refused before anything was counted says %v, which callers may not retry", err)
				}
				waiting--
			}
			if waiting > 0 {
				t.Errorf("%d fast checks still wait after 30s of a barrier that does not pass: no deadline reaches it", waiting)
				break
			}
		}
		close(rig.g.gate)
		if err := stalled.Error(); err != nil {
			t.Fatal(err)
		}
		for range waiting {
			<-done
		}
		// The barrier passes once the state machine caught up: fast checks
		// are answered again, and count.
		if _, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); err != nil {
			t.Fatalf("the barrier passed, yet: %v", err)
		}
		if !lane.drain() {
			t.Fatal("lane did not drain")
		}
		f := rig.r.Apply(fsm.EncodeAllow(nil, time.Now().UnixNano(), []fsm.Check{{Key: "k", Policy: fastPolicy, Cost: 0}}), time.Second)
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		if used := fastPolicy.Limits[0].Limit.Limit - f.Response().([]policy.Result)[0].Remaining; used != 1 {
			t.Errorf("committed %d, want the 1 check answered (the refused ones count nothing)", used)
		}
		lane.close()
		rig.stop(t)
	})
}
