package window_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/floodgate/floodgate/window"
	"github.com/floodgate/floodgate/window/windowtest"
)

// TestPropertyHeapBound: whatever a state holds and whenever a request
// comes (times forwards, backwards, costs up to MaxLimit, checks between),
// Record never leaves the state a buffer larger than HeapBound said before
// it. The FSM refuses checks by that bound (--max-state-mib), so a bound
// below the truth would let a flood of checks pass it.
func TestPropertyHeapBound(t *testing.T) {
	for i, a := range []window.Algorithm{window.SlidingLog, window.SlidingCounter, window.SlidingCounterWeighted,
		window.FixedWindow, window.TokenBucket, window.GCRA} {
		t.Run(a.String(), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(i), 0x4eab))
			for range 300 {
				l := windowtest.Limit(rng, a)
				var s window.State
				now := windowtest.Start(rng, &l)
				for op := range 80 {
					if rng.IntN(5) == 0 {
						now = max(now-rng.Int64N(l.Window+1), 0)
					} else {
						now += windowtest.Step(rng, &l, now)
					}
					c := windowtest.Cost(rng, l.Capacity())
					if rng.IntN(20) == 0 {
						c = window.MaxLimit
					}
					if rng.IntN(3) == 0 {
						l.Check(&s, now, c) // a check alone may shrink, never grow
					}
					bound := l.HeapBound(&s, now, c)
					if rng.IntN(4) == 0 { // recorded later than judged
						now += windowtest.Step(rng, &l, now)
					}
					l.Record(&s, now, c)
					if got := l.HeapBytes(&s); got > bound {
						t.Fatalf("limit %+v, op %d, cost %d: HeapBytes %d after Record, HeapBound said %d", l, op, c, got, bound)
					}
				}
			}
		})
	}
}

// TestHeapBoundCoversTheAllocator: a log's ring is as large as the size
// class the allocator rounds its buffer up to; allocBound (through a
// fresh log's HeapBound) is never below it, for every size up to 40,000
// timestamps.
func TestHeapBoundCoversTheAllocator(t *testing.T) {
	l := window.Limit{Algorithm: window.SlidingLog, Limit: window.MaxLogLength, Window: 1e9}
	for size := 1; size <= 40_000; size++ {
		got := 8 * cap(slices.Grow([]int64(nil), size))
		if bound := l.HeapBound(&window.State{}, 0, int64(size)); got > bound {
			t.Fatalf("%d timestamps: the allocator gives %d bytes, HeapBound says %d", size, got, bound)
		}
	}
}
