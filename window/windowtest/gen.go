package windowtest

import (
	"math/rand/v2"
	"time"

	"github.com/floodgate/floodgate/window"
)

// Random generators. They favor edges: tiny and maximal windows and
// limits, windows that are not multiples of the limit, one bucket and
// MaxBuckets, peeks, costs at and just above the capacity, time steps of
// zero, one nanosecond, and onto (and next to) period boundaries.

const (
	minuteNs = int64(time.Minute)
	hourNs   = int64(time.Hour)
	dayNs    = 24 * hourNs
)

// Limit returns a random valid Limit of algorithm a.
func Limit(rng *rand.Rand, a window.Algorithm) window.Limit {
	l := window.Limit{Algorithm: a}
	switch a {
	case window.SlidingLog:
		l.Limit, l.Window = Count(rng, 200), Window(rng)
	case window.SlidingCounter, window.SlidingCounterWeighted:
		n := [...]int64{1, 2, 3, 10, 60, window.MaxBuckets, rng.Int64N(100) + 1}[rng.IntN(7)]
		b := [...]int64{1, rng.Int64N(20) + 1, rng.Int64N(1000) + 1, int64(time.Second), window.MaxWindow / n, rng.Int64N(window.MaxWindow/n) + 1}[rng.IntN(6)]
		l.Window, l.Buckets = n*b, int32(n)
		if rng.IntN(4) == 0 {
			l.Buckets = 0 // the default for the window, whatever divides it
		}
		l.Limit = Count(rng, window.MaxLimit)
	case window.FixedWindow:
		if rng.IntN(5) < 2 {
			l.Calendar = window.Unit(rng.IntN(int(window.CalendarYear)) + 1)
		} else {
			l.Window = Window(rng)
		}
		l.Limit = Count(rng, window.MaxLimit)
	case window.TokenBucket, window.GCRA:
		for {
			l.Limit, l.Window, l.Burst = Count(rng, window.MaxLimit), Window(rng), 0
			if rng.IntN(5) < 3 {
				l.Burst = Count(rng, window.MaxLimit)
			}
			if l.Validate(0) == nil {
				break
			}
		}
	}
	return l
}

// Window returns a random window length.
func Window(rng *rand.Rand) int64 {
	switch rng.IntN(7) {
	case 0:
		return rng.Int64N(40) + 1
	case 1:
		return rng.Int64N(3000) + 1
	case 2:
		return [...]int64{int64(time.Second), minuteNs, hourNs, dayNs, window.MaxWindow}[rng.IntN(5)]
	case 3:
		return rng.Int64N(window.MaxWindow) + 1
	case 4:
		return window.MaxWindow - rng.Int64N(1000)
	default:
		return rng.Int64N(minuteNs) + 1
	}
}

// Count is in [1, hi], favoring the ends.
func Count(rng *rand.Rand, hi int64) int64 {
	switch rng.IntN(6) {
	case 0:
		return 1
	case 1:
		return min(2, hi)
	case 2:
		return min(rng.Int64N(10)+1, hi)
	case 3:
		return hi
	}
	return rng.Int64N(hi) + 1
}

// Cost favors peeks, unit costs and the capacity; one in twelve is more
// than the capacity, which no request can ever get.
func Cost(rng *rand.Rand, capacity int64) int64 {
	switch rng.IntN(12) {
	case 0, 1:
		return 0
	case 2, 3, 4:
		return 1
	case 5:
		return capacity
	case 6:
		return capacity + 1
	case 7:
		return min(2, capacity)
	}
	return rng.Int64N(capacity) + 1
}

// CalendarStarts are interesting starting times for calendar periods:
// leap and non-leap Februaries (2100 is not a leap year), year ends, a
// Sunday before a Monday.
func CalendarStarts() []time.Time {
	return []time.Time{
		time.Date(2024, 2, 28, 23, 0, 0, 0, time.UTC),
		time.Date(2025, 2, 28, 23, 0, 0, 0, time.UTC),
		time.Date(2100, 2, 28, 23, 0, 0, 0, time.UTC),
		time.Date(2024, 12, 31, 23, 59, 0, 0, time.UTC),
		time.Date(2023, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2026, 1, 4, 23, 59, 0, 0, time.UTC),
	}
}

// Start returns a random starting time for a sequence of requests on l.
func Start(rng *rand.Rand, l *window.Limit) int64 {
	if l.Calendar != window.CalendarNone && rng.IntN(2) == 0 {
		return CalendarStarts()[rng.IntN(len(CalendarStarts()))].UnixNano() - rng.Int64N(int64(time.Hour))
	}
	switch rng.IntN(4) {
	case 0:
		return 0 // the epoch: bucket indices near 0
	case 1:
		return rng.Int64N(1e6)
	case 2:
		return time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano() + rng.Int64N(1e17)
	}
	return rng.Int64N(2e18)
}

// Step advances time from now: often not at all, by a nanosecond, by up
// to l's natural unit, onto a boundary (and one off it), or by several
// windows at once.
func Step(rng *rand.Rand, l *window.Limit, now int64) int64 {
	if now > 6e18 {
		return rng.Int64N(2)
	}
	w, unit := l.Window, l.Window
	switch l.Algorithm {
	case window.SlidingCounter, window.SlidingCounterWeighted:
		unit = l.Window / int64(Buckets(l))
	case window.TokenBucket, window.GCRA, window.SlidingLog:
		unit = max(l.Window/l.Limit, 1)
	case window.FixedWindow:
		if l.Calendar != window.CalendarNone {
			w = window.PeriodEnd(l.Calendar, now) - window.PeriodStart(l.Calendar, now)
			unit = w
		}
	}
	switch rng.IntN(10) {
	case 0, 1:
		return 0
	case 2:
		return 1
	case 3:
		return rng.Int64N(unit + 1)
	case 4:
		return rng.Int64N(w/4 + 1)
	case 5:
		return rng.Int64N(w + 1)
	case 6: // onto the next boundary of unit or window, or one ns either side
		step := unit - ((now%unit)+unit)%unit
		if l.Calendar != window.CalendarNone {
			step = window.PeriodEnd(l.Calendar, now) - now
		}
		return max(step+rng.Int64N(3)-1, 0)
	case 7:
		return w + rng.Int64N(3*w+1)
	}
	return rng.Int64N(3*unit + 1)
}
