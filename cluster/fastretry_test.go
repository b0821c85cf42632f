package cluster

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
)

// README's bound: a failover loses at most 2 × (--fast-max-pending + the
// largest cost of one check) answered and not committed. A flush refused
// before it reached the log (raft's apply queue full: ErrEnqueueTimeout)
// is put back into pending with everything gathered meanwhile; the lane
// let up to --fast-max-pending more in while that larger batch was tried
// again, so every refused round added a lane's worth (260 after four
// rounds, against a bound of 150). Now no check is let in while a batch
// put back is retried.
func TestFastBoundHoldsWhileBatchesAreRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true)
		lane := newFastLane(rig.r, rig.g.shard, testFastConfig(), nil, func() error { return rig.nl })
		ctx := context.Background()
		answered := int64(0)
		decide := func(cost int64) bool {
			cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			res, err := lane.decide(cctx, fsm.Check{Key: "k", Policy: fastPolicy, Cost: cost})
			if err == nil && res.Allowed {
				answered += cost
			}
			synctest.Wait()
			return err == nil
		}
		decide(0) // passes the leadership barrier, counts nothing

		// Stall the leader loop: the FSM waits at the gate, so once raft's
		// FSM queue is full, the leader loop blocks and Apply times out.
		enqueueTimeout := false
		for i := 0; i < 1000 && !enqueueTimeout; i++ {
			done := make(chan error, 1)
			go func() {
				done <- rig.r.Apply(fsm.EncodeTick(time.Now().UnixNano()), 10*time.Millisecond).Error()
			}()
			time.Sleep(20 * time.Millisecond)
			synctest.Wait()
			select {
			case err := <-done:
				enqueueTimeout = errors.Is(err, raft.ErrEnqueueTimeout)
			default:
			}
		}
		if !enqueueTimeout {
			t.Fatal("could not stall raft's apply queue")
		}
		bound := 2 * (testFastConfig().FastMaxPending + 35)
		for round := 0; round < 4; round++ {
			for _, c := range []int64{30, 35} {
				decide(c)
			}
			time.Sleep(1500 * time.Millisecond) // the flush's Apply times out, is put back, tried again
			synctest.Wait()
			t.Logf("round %d: answered and not committed %d (bound %d), lane pending %d, raft last index %d, state %v", round, answered, bound, lane.pendingCost(), rig.r.LastIndex(), rig.r.State())
		}
		if answered > bound {
			t.Errorf("answered %d cost that is not committed; README's bound is %d", answered, bound)
		}
		close(rig.g.gate)
		lane.drain()
		lane.close()
		rig.stop(t)
	})
}
