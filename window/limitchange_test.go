package window_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/test/proptest"
	"github.com/floodgate/floodgate/window"
	"github.com/floodgate/floodgate/window/windowtest"
)

// TestPropertyLimitChanges reads and records one State with limits of the
// same shape and different values, as soft and elastic policies do when
// they stretch a limit (and operators when they raise one): every answer
// matches the reference read with the limit of the moment.
func TestPropertyLimitChanges(t *testing.T) {
	for i, a := range []window.Algorithm{window.SlidingLog, window.SlidingCounter, window.SlidingCounterWeighted,
		window.FixedWindow, window.TokenBucket, window.GCRA} {
		t.Run(a.String(), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(i), 0xc4a9e))
			seqs := proptest.Runs(100)
			for range seqs {
				runChanging(t, rng, windowtest.Limit(rng, a), 100)
			}
		})
	}
}

func runChanging(t *testing.T, rng *rand.Rand, base window.Limit, ops int) {
	t.Helper()
	limits := []window.Limit{base, otherValue(rng, base), otherValue(rng, base)}
	m := windowtest.New(base)
	var s window.State
	now := windowtest.Start(rng, &base)
	var hist strings.Builder
	for op := range ops {
		l := limits[rng.IntN(len(limits))]
		now += windowtest.Step(rng, &l, now)
		c := windowtest.Cost(rng, l.Capacity())
		m.SetLimit(l)
		got, want := l.Check(&s, now, c), windowtest.Check(m, now, c)
		fmt.Fprintf(&hist, "  op %d: limit %d burst %d, now %d cost %d -> %+v\n", op, l.Limit, l.Burst, now, c, got)
		if got != want {
			t.Fatalf("limits %+v\nhistory:\n%sgot  %+v\nwant %+v", limits, hist.String(), got, want)
		}
		if c > 0 && (got.Allowed || rng.IntN(3) == 0) {
			l.Record(&s, now, c)
			m.Record(now, c)
			fmt.Fprintf(&hist, "  recorded\n")
		}
		checkMonotone(t, rng, m, now)
		roundTrip(t, &l, &s)
	}
}

// otherValue returns l with another limit (and burst), the same shape:
// stretched as a policy stretches it, or any other valid value.
func otherValue(rng *rand.Rand, l window.Limit) window.Limit {
	v := l
	if rng.IntN(2) == 0 {
		pct := [...]int64{101, 110, 150, 200, 1100}[rng.IntN(5)]
		v.Limit = min(window.MaxLimit, max(1, l.Limit*pct/100))
		if l.Burst > 0 {
			v.Burst = min(window.MaxLimit, max(1, l.Burst*pct/100))
		}
	} else {
		hi := window.MaxLimit
		if l.Algorithm == window.SlidingLog {
			hi = 200
		}
		v.Limit = windowtest.Count(rng, hi)
		if l.Burst > 0 {
			v.Burst = windowtest.Count(rng, window.MaxLimit)
		}
	}
	if v.Validate(0) != nil {
		return l
	}
	return v
}
