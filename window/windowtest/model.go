package windowtest

import (
	"fmt"

	"github.com/floodgate/floodgate/window"
)

// Model is a brute-force reference of one Limit's state for one key.
type Model interface {
	// Capacity is the most cost admitted at once from a fresh state.
	Capacity() int64
	// Used is the capacity in use at t (at or after the last recorded
	// time) if nothing more is recorded.
	Used(t int64) int64
	// Horizon is a time at or after now by which Used is surely 0.
	Horizon(now int64) int64
	// Linear is the longest range Check scans time by time (every
	// nanosecond) instead of binary searching.
	Linear() int64
	// Record counts cost (> 0) at now, as window.Limit.Record does.
	Record(now, cost int64)
	// SetLimit changes the limit the model is read and recorded with to
	// l, which has the same shape (algorithm, window, buckets, calendar)
	// and another value or burst, as a stretched or changed limit reads a
	// stored window.State: the counting algorithms keep their counts; a
	// bucket keeps the time it is full again (see bucket).
	SetLimit(l window.Limit)
}

// New returns the reference of l's algorithm, empty.
func New(l window.Limit) Model {
	switch l.Algorithm {
	case window.SlidingLog:
		return &slidingLog{l: l}
	case window.SlidingCounter, window.SlidingCounterWeighted:
		return &counter{l: l}
	case window.FixedWindow:
		return &fixed{l: l}
	case window.TokenBucket, window.GCRA:
		return &bucket{l: l, w: l}
	}
	panic("windowtest: no model for " + l.Algorithm.String())
}

// NewExact returns the reference of l's algorithm as a caller sees it
// across every limit a stored state is read with: a sliding log counts
// every unit recorded in the window, however many, instead of the newest
// Limit that window keeps (New). The two answer alike at any limit up to
// the ones recorded with, so a policy whose log dropped timestamps it
// later reads at a higher limit (elastic room returning) is caught.
func NewExact(l window.Limit) Model {
	if l.Algorithm == window.SlidingLog {
		return &exactLog{l: l}
	}
	return New(l)
}

// Check answers a request of cost at now from m's Used(t), by search:
// ResetAt is the first t >= now with nothing used, RetryAfter the first
// t > now at which the cost fits. Used never increases without records
// (CheckMonotone checks it), so binary search finds those first times.
func Check(m Model, now, cost int64) window.Decision {
	capacity, used := m.Capacity(), m.Used(now)
	c := max(cost, 1)
	fitsAt := func(t int64) bool { return c <= capacity && m.Used(t)+c <= capacity }
	var d window.Decision
	d.Allowed = fitsAt(now)
	d.Remaining = capacity - used
	if d.Allowed {
		d.Remaining -= cost
	}
	d.Remaining = max(d.Remaining, 0)
	h := m.Horizon(now)
	d.ResetAt = firstTrue(now, h, m.Linear(), func(t int64) bool { return m.Used(t) == 0 })
	if !d.Allowed {
		if c > capacity {
			d.RetryAfter = max(d.ResetAt-now, 1)
		} else {
			d.RetryAfter = firstTrue(now+1, h, m.Linear(), fitsAt) - now
		}
	}
	return d
}

// Monotone reports whether m keeps the premise of Check between now and
// its horizon, probing two times t1 <= t2 chosen by pick (which returns a
// value in [0, n)): with nothing recorded, Used never increases, and it is
// 0 at the horizon. It returns a description of the violation, or "".
func Monotone(m Model, now int64, pick func(n int64) int64) string {
	h := m.Horizon(now)
	t1 := now + pick(h-now+1)
	t2 := t1 + pick(h-t1+1)
	if u1, u2 := m.Used(t1), m.Used(t2); u1 < u2 || m.Used(h) != 0 {
		return fmt.Sprintf("used(%d)=%d < used(%d)=%d, or used(horizon %d)=%d", t1, u1, t2, u2, h, m.Used(h))
	}
	return ""
}

// firstTrue is the least t in [lo, hi] with pred(t), for pred monotone
// (false, then true) and pred(hi) true.
func firstTrue(lo, hi, linear int64, pred func(int64) bool) int64 {
	if hi < lo {
		panic("windowtest: firstTrue: empty range")
	}
	if hi-lo <= linear {
		for t := lo; t < hi; t++ {
			if pred(t) {
				return t
			}
		}
		if !pred(hi) {
			panic("windowtest: firstTrue: predicate false at the horizon")
		}
		return hi
	}
	if !pred(hi) {
		panic("windowtest: firstTrue: predicate false at the horizon")
	}
	for lo < hi {
		m := lo + (hi-lo)/2
		if pred(m) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}
