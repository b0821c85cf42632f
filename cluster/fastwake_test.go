package cluster

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/fsm"
)

// Callers waiting for room in a full lane: one that gives up returns at
// once, nothing counted, and wakes no other (the lane's wake-up channel is
// the same); the others are decided once the batch in flight commits.
// Each caller giving up woke every other one before: thousands of callers
// giving up one after another cost the lane's lock a time growing with the
// square of their number.
func TestFastCallerGivingUpWakesNoOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true)
		lane := stalledFastLane(t, rig)
		for range 2 { // a batch in flight, a full lane behind it
			if _, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: testFastConfig().FastMaxPending}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		errs := make([]chan error, 3)
		cancels := make([]context.CancelFunc, 3)
		for i := range errs {
			ctx, cancel := context.WithCancel(context.Background())
			errs[i], cancels[i] = make(chan error, 1), cancel
			go func() {
				_, err := lane.decide(ctx, fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1})
				errs[i] <- err
			}()
		}
		synctest.Wait() // all three wait for room
		lane.mu.Lock()
		before := lane.roomCh
		lane.mu.Unlock()
		cancels[0]()
		synctest.Wait()
		select {
		case err := <-errs[0]:
			if !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.Canceled) {
				t.Errorf("the caller that gave up: %v, want not counted", err)
			}
		default:
			t.Fatal("the caller that gave up still waits")
		}
		lane.mu.Lock()
		woke := lane.roomCh != before
		lane.mu.Unlock()
		if woke {
			t.Error("a caller giving up woke the others")
		}
		for i := 1; i < 3; i++ {
			select {
			case err := <-errs[i]:
				t.Fatalf("caller %d returned (%v) while the lane is full", i, err)
			default:
			}
		}
		close(rig.g.gate)
		for i := 1; i < 3; i++ {
			if err := <-errs[i]; err != nil {
				t.Errorf("caller %d once room was back: %v", i, err)
			}
			cancels[i]()
		}
		lane.close()
		rig.stop(t)
	})
}

// stalledFastLane returns a fast lane on rig's group, past its leadership
// barrier, whose commits stall from now on (until rig.g.gate is closed).
func stalledFastLane(t *testing.T, rig *batcherRig) *fastLane {
	t.Helper()
	close(rig.g.gate)
	lane := newFastLane(rig.r, rig.g.shard, testFastConfig(), nil, func() error { return rig.nl })
	if _, err := lane.decide(context.Background(), fsm.Check{Key: "warm", Policy: fastPolicy, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	lane.drain()
	rig.g.gate = make(chan struct{})
	return lane
}
