package window_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/window"
	"github.com/floodgate/floodgate/window/windowtest"
)

// TestPropertyHostileTimes drives every algorithm with what a hostile world
// stamps into log entries: times that go backwards (a leader change, clock
// skew), times at the end of the int64 range, costs at MaxLimit. No
// reference describes answers in the past, so it checks what a client
// reads: Allowed and RetryAfter agree, Remaining is within the capacity,
// a denial of a cost that fits admits the same request RetryAfter later
// and not 1ns sooner (unless that lies past the int64 range), recording
// never gives capacity back, and the state always encodes and decodes.
func TestPropertyHostileTimes(t *testing.T) {
	for i, a := range []window.Algorithm{window.SlidingLog, window.SlidingCounter, window.SlidingCounterWeighted,
		window.FixedWindow, window.TokenBucket, window.GCRA} {
		t.Run(a.String(), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(i), 0xbac4))
			for range 300 {
				runHostile(t, rng, windowtest.Limit(rng, a), 60)
			}
		})
	}
}

func runHostile(t *testing.T, rng *rand.Rand, l window.Limit, ops int) {
	t.Helper()
	var s window.State
	now := windowtest.Start(rng, &l)
	if rng.IntN(3) == 0 {
		now = math.MaxInt64 - rng.Int64N(4*max(l.Window, 1)+10)
	}
	backwards := rng.IntN(2) == 0
	var hist strings.Builder
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("limit %+v\nhistory:\n%s%s", l, hist.String(), fmt.Sprintf(format, args...))
	}
	for op := range ops {
		switch step := windowtest.Step(rng, &l, now); {
		case backwards && rng.IntN(4) == 0:
			now = max(now-rng.Int64N(2*max(l.Window, 1)+1), 0)
		case now > math.MaxInt64-step:
			now = math.MaxInt64
		default:
			now += step
		}
		c := windowtest.Cost(rng, l.Capacity())
		if rng.IntN(20) == 0 {
			c = window.MaxLimit
		}
		d := l.Check(&s, now, c)
		fmt.Fprintf(&hist, "  op %d: now %d cost %d -> %+v\n", op, now, c, d)
		if d.Allowed != (d.RetryAfter == 0) || d.RetryAfter < 0 || d.Remaining < 0 || d.Remaining > l.Capacity() {
			fail("an answer no client can read")
		}
		// A reset at math.MaxInt64 is saturated: the admission it waits for
		// lies past the int64 range, where no entry can be stamped.
		if !d.Allowed && max(c, 1) <= l.Capacity() && d.ResetAt < math.MaxInt64 {
			for _, at := range []int64{now + d.RetryAfter - 1, now + d.RetryAfter} {
				c2 := clone(&l, &s)
				if got := l.Check(&c2, at, c); got.Allowed != (at == now+d.RetryAfter) {
					fail("denied with retry after %d, but at %d (%+d) the same request answers %+v", d.RetryAfter, at, at-now, got)
				}
			}
		}
		if c > 0 && (d.Allowed || rng.IntN(3) == 0) {
			before := clone(&l, &s)
			l.Record(&s, now, c)
			fmt.Fprintf(&hist, "  recorded\n")
			// Counting never gives capacity back, whenever it is stamped.
			after := clone(&l, &s)
			later := min(rng.Int64N(max(l.Window, 1)+1), math.MaxInt64-now)
			for _, at := range []int64{now, now + later} {
				b, a := l.Check(&before, at, 0), l.Check(&after, at, 0)
				if a.Remaining > b.Remaining || a.Allowed && !b.Allowed {
					fail("recording %d at %d gave capacity back: at %d it answers %+v, before %+v", c, now, at, a, b)
				}
			}
		}
		clone(&l, &s)
	}
}

// clone is s through its encoding, which must decode.
func clone(l *window.Limit, s *window.State) window.State {
	c, _, err := l.DecodeState(l.AppendState(nil, s))
	if err != nil {
		panic(err)
	}
	return c
}
