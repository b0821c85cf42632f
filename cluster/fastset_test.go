package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/fsm"
)

// An atomic set of fast checks (an Envoy request's descriptors under a
// colocated policy) is one decision: let in whole once the lane has room,
// so what a failover can lose is under 2 × (--fast-max-pending + the
// largest decision's cost), its checks' costs summed (README's bound).
// With one batch stuck in flight and a second set pending, a third set
// waits for room, and nothing past that bound is answered.
func TestFastSetsStayWithinTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true) // commits stall until the gate opens
		cfg := testFastConfig()
		lane := newFastLane(rig.r, rig.g.shard, cfg, nil, func() error { return rig.nl })
		const size = 500 // far above FastMaxPending
		set := func(prefix string) []fsm.Check {
			s := make([]fsm.Check, size)
			for i := range s {
				s[i] = fsm.Check{Key: fmt.Sprintf("%s%d", prefix, i), Policy: fastPolicy, Cost: 1, Joined: i > 0}
			}
			return s
		}
		decide := func(s []fsm.Check) error {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := lane.decideSet(ctx, s, false)
			return err
		}
		if err := decide(set("a")); err != nil { // flushed: the batch stalls in flight
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		if err := decide(set("b")); err != nil { // room again: pending
			t.Fatal(err)
		}
		if err := decide(set("c")); !errors.Is(err, ErrNoLeader) {
			t.Fatalf("a third set beside a full lane and a batch in flight: %v, want a wait for room", err)
		}
		if got, bound := lane.pendingCost(), 2*(cfg.FastMaxPending+size); got >= bound {
			t.Errorf("answered and not committed: %d, over the bound %d", got, bound)
		}
		close(rig.g.gate)
		lane.drain()
		lane.close()
		rig.stop(t)
	})
}
