package cluster

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/fsm"
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
		lane := newFastLane(rig.r, rig.g.shard, testFastConfig(), func() error { return rig.nl })
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
