package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// fastAndStrict returns the fast and the strict version of one policy
// with a limit of limit an hour, as the nodes that take checks hold while
// a change of its consistency spreads. A sliding log: a fixed window ends
// at the next epoch-aligned hour, and one passing while a test counted
// admitted more than the limit.
func fastAndStrict(limit int64) (fast, strict *policy.Policy) {
	lim := policy.Limit{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: limit, Window: int64(time.Hour)}}
	return &policy.Policy{Name: "p", Consistency: policy.Fast, Limits: []policy.Limit{lim}},
		&policy.Policy{Name: "p", Limits: []policy.Limit{lim}}
}

// leadingNode starts a one-node cluster, its config changed by change
// (startOneWith), and returns it once it leads shard 0, with a context for the
// test's calls.
func leadingNode(t *testing.T, change func(*Config)) (*Node, context.Context) {
	t.Helper()
	n := startOneWith(t, change)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if err := n.replica(0).group.waitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return n, ctx
}

// submitOne submits one check of cost 1 and reports whether it was admitted.
func submitOne(ctx context.Context, t *testing.T, n *Node, p *policy.Policy) bool {
	t.Helper()
	res, err := n.Submit(ctx, 0, []fsm.Check{{Key: "k", Policy: p, Cost: 1}})
	if err != nil {
		t.Error(err)
		return false
	}
	return res[0].Allowed
}

// A policy switched from fast to strict: a strict check must count the
// fast decisions answered before it. It was decided at apply on the
// committed state, which lacked those not flushed yet, and a limit of 5
// admitted 10.
func TestStrictCheckCountsPendingFastDecisions(t *testing.T) {
	n, ctx := leadingNode(t, func(c *Config) { c.FastFlushInterval = 5 * time.Second })
	fast, strict := fastAndStrict(5)
	admitted := 0
	for range 5 {
		if submitOne(ctx, t, n, fast) {
			admitted++
		}
	}
	for range 5 {
		if submitOne(ctx, t, n, strict) {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("admitted %d with a limit of 5", admitted)
	}
}

// Checks of one key under both versions of a policy whose consistency
// changes, at once: together they never pass the limit. Fast decisions
// missed the strict checks written and not yet applied, strict checks
// the fast decisions not yet flushed: a limit of 50 admitted 100.
func TestMixedConsistencyNeverPassesTheLimit(t *testing.T) {
	n, ctx := leadingNode(t, nil)
	fast, strict := fastAndStrict(50)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		p := fast
		if g%2 == 0 {
			p = strict
		}
		wg.Go(func() {
			for range 20 {
				if submitOne(ctx, t, n, p) {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != 50 {
		t.Fatalf("admitted %d of 160 checks with a limit of 50", got)
	}
}

// A reset forgets the fast decisions answered before it, also when it
// names the policy's new, strict version: it drained the fast lane only
// for a fast policy, and the pending decisions, flushed after the reset,
// were counted again.
func TestResetUnderStrictVersionForgetsFastDecisions(t *testing.T) {
	n, ctx := leadingNode(t, func(c *Config) { c.FastFlushInterval = 5 * time.Second })
	fast, strict := fastAndStrict(5)
	for range 3 {
		if !submitOne(ctx, t, n, fast) {
			t.Fatal("denied under the limit")
		}
	}
	if _, err := n.ResetKey(ctx, 0, "k", strict); err != nil {
		t.Fatal(err)
	}
	res, err := n.Submit(ctx, 0, []fsm.Check{{Key: "k", Policy: strict, Cost: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Remaining != 5 {
		t.Fatalf("remaining %d after a reset, want 5", res[0].Remaining)
	}
}

// A strict check whose caller gave up after it was written (its commit
// stalled past the caller's deadline) may still be applied: until it is,
// fast checks of its key must go through the log after it, not be decided
// from memory without it. The guard forgot it when its caller returned,
// and the fast decisions then missed it, as in the case above. Whether or
// not the lane had seen a fast check before (the guard's two ways of
// counting strict checks).
func TestStrictCheckGivenUpHoldsFastChecksOfItsKeyUntilDecided(t *testing.T) {
	for _, seen := range []bool{false, true} {
		t.Run(fmt.Sprintf("fast seen %v", seen), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rig := newBatcherRig(t, 10, true)
				close(rig.g.gate)
				lane := newFastLane(rig.r, rig.g.shard, testFastConfig(), nil, func() error { return rig.nl })
				// The new leader's barrier passes first: it waits for the
				// log, which stalls below.
				if _, err := lane.leading(context.Background()); err != nil {
					t.Fatal(err)
				}
				if seen {
					if _, err := lane.decide(context.Background(), fsm.Check{Key: "other", Policy: fastPolicy, Cost: 1}); err != nil {
						t.Fatal(err)
					}
					lane.drain()
				}
				strict := *fastPolicy // the same policy, its strict version
				strict.Consistency = policy.Strict
				rig.g.gate = make(chan struct{}) // commits stall from now on
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := submitStrict(ctx, lane, rig.b, []fsm.Check{{Key: "k", Policy: &strict, Cost: 1}}, nil)
				cancel()
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("seen %v: a strict check whose commit stalled: %v, want ErrUnavailable (outcome unknown)", seen, err)
				}
				if _, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); !errors.Is(err, errTakeStrict) {
					t.Errorf("seen %v: a fast check of its key while it is undecided: %v, want errTakeStrict", seen, err)
				}
				close(rig.g.gate)
				synctest.Wait() // the strict check is applied
				if _, err := lane.decide(context.Background(), fsm.Check{Key: "k", Policy: fastPolicy, Cost: 1}); err != nil {
					t.Errorf("seen %v: a fast check once the strict one was applied: %v", seen, err)
				}
				lane.close()
				rig.stop(t)
			})
		})
	}
}
