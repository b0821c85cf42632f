package cluster

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/fsm"
)

// One Submit of several fast checks (a forward carrying many callers'
// checks, or one AllowBatch) is decided set by set. A hand-over that
// starts between two of them refuses the later ones, written nowhere:
// those get their own retryable error, for their callers to send to the
// new leader, while the checks decided before keep their answers. The
// whole call failed with an unknown outcome before, every check of it,
// counted or not.
func TestFastHandOverMidSubmitAnswersEachCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true)
		lane := stalledFastLane(t, rig)
		if _, err := lane.decide(context.Background(), fsm.Check{Key: "other", Policy: fastPolicy, Cost: 1}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // its batch is in flight, held at the gate
		synctest.Wait()
		n := &Node{}
		r := &replica{id: 0, fsm: rig.g.shard, batcher: rig.b, fast: lane}
		// a fills the lane, b waits for room.
		checks := []fsm.Check{{Key: "a", Policy: fastPolicy, Cost: 40}, {Key: "b", Policy: fastPolicy, Cost: 1}}
		done := make(chan error, 1)
		go func() {
			_, err := n.submit(context.Background(), 0, r, checks, nil)
			done <- err
		}()
		synctest.Wait() // a decided, b waiting for room
		go func() { _ = lane.handOver(func() error { return nil }) }()
		synctest.Wait()
		err := <-done
		var pe *PartialError
		if !errors.As(err, &pe) {
			t.Fatalf("submit: %v, want each check's own answer", err)
		}
		if pe.Errs[0] != nil || !pe.Results[0].Allowed {
			t.Errorf("the decided check: %+v, %v, want its answer", pe.Results[0], pe.Errs[0])
		}
		if !Retryable(pe.Errs[1]) {
			t.Errorf("the check refused by the hand-over: %v, want an error that says it was written nowhere", pe.Errs[1])
		}
		if Retryable(err) {
			t.Error("the call as a whole is retryable: its decided check would count twice")
		}
		close(rig.g.gate)
		synctest.Wait()
		lane.close()
		rig.stop(t)
	})
}
