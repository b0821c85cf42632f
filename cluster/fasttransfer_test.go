package cluster

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/fsm"
)

// A leadership transfer that times out (its target slow to answer
// TimeoutNow) leaves raft refusing every write as "transfer in progress"
// until the target answers, and then the target takes over. The lane's
// batches came back to pending, and it let a lane's worth in behind each
// retry: thousands of answered checks were lost at the takeover, against
// a bound of 2 × (--fast-max-pending + 1). Now none is let in while a
// batch is retried, and retries are paced.
func TestFastBoundHoldsThroughATransferThatTimesOut(t *testing.T) {
	// In a bubble: raft, the lanes and the load run on fake time, so a
	// stall of the machine cannot step the leader down or let the slow
	// TimeoutNow through before the checks below.
	synctest.Test(t, func(t *testing.T) {
		g := newMemGroup(t, 3)
		defer g.close()
		g.slowTimeoutNow.Store(int64(1500 * time.Millisecond))
		cfg := testFastConfig() // FastMaxPending 40
		lanes := lanesOf(g, cfg)
		defer closeLanes(lanes)
		load := startFastLoad(g, lanes)
		time.Sleep(300 * time.Millisecond)
		li := g.waitLeader(t)
		target := (li + 1) % 3
		t0 := time.Now()
		err := lanes[li].handOver(func() error {
			return g.rafts[li].LeadershipTransferToServer(raft.ServerID(fmt.Sprintf("r%d", target)), raft.ServerAddress(fmt.Sprintf("r%d", target))).Error()
		})
		if err == nil || g.rafts[li].State() != raft.Leader {
			t.Fatalf("handOver: %v, still leading: %v; want a transfer that timed out", err, g.rafts[li].State() == raft.Leader)
		}
		lanes[li].mu.Lock()
		before := lanes[li].refusals
		lanes[li].mu.Unlock()
		time.Sleep(200 * time.Millisecond)
		if perr := g.rafts[li].Apply(fsm.EncodeTick(time.Now().UnixNano()), time.Second).Error(); !errors.Is(perr, raft.ErrLeadershipTransferInProgress) {
			t.Fatalf("a write 200ms after the transfer timed out: %v, want it refused as a transfer in progress", perr)
		}
		lanes[li].mu.Lock()
		refused := lanes[li].refusals - before
		lanes[li].mu.Unlock()
		// Sent again every retryPause at most, not in a loop kept going by
		// the waiting callers' nudges (tens of thousands in 200ms).
		if most := int64(200*time.Millisecond/retryPause) + 5; refused > most {
			t.Errorf("raft refused %d batches in 200ms of a transfer in progress, want at most %d", refused, most)
		}
		t.Logf("handOver returned after %v: %v; %d batches refused in the next 200ms", time.Since(t0).Round(time.Millisecond), err, refused)
		time.Sleep(2300 * time.Millisecond)
		t.Logf("leader now r%d (was r%d)", g.leader(), li)
		load.halt()
		for _, l := range lanes {
			l.drain()
		}
		got, want := committedCount(t, g, "k"), load.admitted.Load()
		t.Logf("admitted %d, committed %d, lost %d (bound 2x(40+1)=82)", want, got, want-got)
		if want-got > 82 {
			t.Errorf("lost %d answered fast decisions on one leadership change, bound is 82", want-got)
		}
	})
}
