package window

import (
	"maps"
	"math"
	"math/big"
	"slices"
	"time"
)

// Brute-force references. Each keeps the whole history in the most obvious
// form and computes "used" at any time straight from the definition in the
// package's contract; refCheck derives every Decision field from used(t)
// alone, by search, never by the closed forms the package uses.

// model is a reference implementation of one algorithm.
type model interface {
	// capacity is the most cost admitted at once from a fresh state.
	capacity() int64
	// used is the capacity in use at t (>= the last recorded time) if
	// nothing more is recorded.
	used(t int64) int64
	// horizon is a time at or after now by which used is surely 0.
	horizon(now int64) int64
	// linear is the longest range refCheck scans time by time (every
	// nanosecond) instead of binary searching.
	linear() int64
	record(now, cost int64)
}

// refCheck answers a request of cost at now from m's used(t), by search:
// ResetAt is the first t >= now with nothing used, RetryAfter the first
// t > now at which the cost fits. used never increases without records
// (testMonotone checks it), so binary search finds those first times.
func refCheck(m model, now, cost int64) Decision {
	capacity, used := m.capacity(), m.used(now)
	c := max(cost, 1)
	fitsAt := func(t int64) bool { return c <= capacity && m.used(t)+c <= capacity }
	var d Decision
	d.Allowed = fitsAt(now)
	d.Remaining = capacity - used
	if d.Allowed {
		d.Remaining -= cost
	}
	d.Remaining = max(d.Remaining, 0)
	h := m.horizon(now)
	d.ResetAt = firstTrue(now, h, m.linear(), func(t int64) bool { return m.used(t) == 0 })
	if !d.Allowed {
		if c > capacity {
			d.RetryAfter = max(d.ResetAt-now, 1)
		} else {
			d.RetryAfter = firstTrue(now+1, h, m.linear(), fitsAt) - now
		}
	}
	return d
}

// firstTrue is the least t in [lo, hi] with pred(t), for pred monotone
// (false, then true) and pred(hi) true.
func firstTrue(lo, hi, linear int64, pred func(int64) bool) int64 {
	if hi < lo {
		panic("firstTrue: empty range")
	}
	if hi-lo <= linear {
		for t := lo; t < hi; t++ {
			if pred(t) {
				return t
			}
		}
		if !pred(hi) {
			panic("firstTrue: predicate false at the horizon")
		}
		return hi
	}
	if !pred(hi) {
		panic("firstTrue: predicate false at the horizon")
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

// refLog: every recorded timestamp, trimmed to the newest Limit.
type refLog struct {
	l  Limit
	ts []int64
}

func (m *refLog) capacity() int64 { return m.l.Limit }
func (m *refLog) linear() int64   { return 1024 }

func (m *refLog) used(t int64) int64 {
	n := int64(0)
	for _, x := range m.ts {
		if x > t-m.l.Window {
			n++
		}
	}
	return n
}

func (m *refLog) horizon(now int64) int64 {
	if len(m.ts) == 0 {
		return now
	}
	return max(now, slices.Max(m.ts)+m.l.Window)
}

func (m *refLog) record(now, cost int64) {
	for range min(cost, m.l.Limit) {
		m.ts = append(m.ts, now)
	}
	if over := int64(len(m.ts)) - m.l.Limit; over > 0 {
		m.ts = m.ts[over:]
	}
}

// refCounter: a map from bucket index to count.
type refCounter struct {
	l      Limit
	counts map[int64]uint64
}

func (m *refCounter) capacity() int64 { return m.l.Limit }
func (m *refCounter) linear() int64   { return 1024 }
func (m *refCounter) n() int64        { return int64(m.l.buckets()) }
func (m *refCounter) b() int64        { return m.l.Window / m.n() }

func (m *refCounter) used(t int64) int64 {
	b, n := m.b(), m.n()
	cur := t / b
	var sum uint64
	for i, c := range m.counts {
		if i > cur-n && i <= cur {
			sum += c
		}
	}
	if m.l.Algorithm == SlidingCounterWeighted {
		// ceil(count·(b-o)/b) in big integers.
		x := new(big.Int).SetUint64(m.counts[cur-n])
		x.Mul(x, big.NewInt(b-(t-cur*b)))
		x.Add(x, big.NewInt(b-1))
		x.Quo(x, big.NewInt(b))
		sum += x.Uint64()
	}
	return int64(sum)
}

func (m *refCounter) horizon(now int64) int64 {
	if len(m.counts) == 0 {
		return now
	}
	k := m.n()
	if m.l.Algorithm == SlidingCounterWeighted {
		k++
	}
	newest := slices.Max(slices.Collect(maps.Keys(m.counts)))
	return max(now, (newest+k)*m.b())
}

func (m *refCounter) record(now, cost int64) {
	if m.counts == nil {
		m.counts = map[int64]uint64{}
	}
	i := now / m.b()
	m.counts[i] = min(m.counts[i]+uint64(cost), math.MaxUint32)
	for j := range m.counts {
		if j < i-m.n()-1 {
			delete(m.counts, j) // out of every window from now on
		}
	}
}

// refFixed: every record, with its period found through package time.
type refFixed struct {
	l    Limit
	recs [][2]int64 // time, cost
}

func (m *refFixed) capacity() int64 { return m.l.Limit }
func (m *refFixed) linear() int64   { return 1024 }

func (m *refFixed) used(t int64) int64 {
	start, _ := refPeriod(&m.l, t)
	n := int64(0)
	for _, r := range m.recs {
		if s, _ := refPeriod(&m.l, r[0]); s == start {
			n += r[1]
		}
	}
	return n
}

func (m *refFixed) horizon(now int64) int64 {
	_, end := refPeriod(&m.l, now)
	return end
}

func (m *refFixed) record(now, cost int64) {
	// Earlier periods never count again: keep only now's.
	start, _ := refPeriod(&m.l, now)
	m.recs = slices.DeleteFunc(m.recs, func(r [2]int64) bool {
		s, _ := refPeriod(&m.l, r[0])
		return s != start
	})
	m.recs = append(m.recs, [2]int64{now, cost})
}

// refPeriod is the period of l containing t: epoch-aligned multiples of
// Window, or calendar periods found with Time.Truncate (the zero Time,
// January 1 of year 1, is a Monday, so week truncation gives ISO weeks)
// and AddDate.
func refPeriod(l *Limit, t int64) (start, end int64) {
	if l.Calendar == CalendarNone {
		k := t / l.Window
		return k * l.Window, (k + 1) * l.Window
	}
	tm := time.Unix(0, t).UTC()
	var s, e time.Time
	switch l.Calendar {
	case CalendarMinute:
		s = tm.Truncate(time.Minute)
		e = s.Add(time.Minute)
	case CalendarHour:
		s = tm.Truncate(time.Hour)
		e = s.Add(time.Hour)
	case CalendarDay:
		s = tm.Truncate(24 * time.Hour)
		e = s.AddDate(0, 0, 1)
	case CalendarWeek:
		s = tm.Truncate(7 * 24 * time.Hour)
		e = s.AddDate(0, 0, 7)
	case CalendarMonth:
		s = time.Date(tm.Year(), tm.Month(), 1, 0, 0, 0, 0, time.UTC)
		e = s.AddDate(0, 1, 0)
	case CalendarYear:
		s = time.Date(tm.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
		e = s.AddDate(1, 0, 0)
	}
	return s.UnixNano(), e.UnixNano()
}

// refBucket: the exact token count, scaled by Window so it is an integer
// (tokens·Window), and the time it was last set. It serves TokenBucket and
// GCRA alike: GCRA is a bucket of Burst (or 1) tokens refilled one per
// Window/Limit.
type refBucket struct {
	l      Limit
	scaled *big.Int // tokens·Window at t0; nil means a full bucket
	t0     int64
}

func (m *refBucket) capacity() int64 {
	if m.l.Burst > 0 {
		return m.l.Burst
	}
	if m.l.Algorithm == GCRA {
		return 1
	}
	return m.l.Limit
}

func (m *refBucket) linear() int64 { return 64 }

// full is C·Window, a full bucket scaled.
func (m *refBucket) full() *big.Int {
	return new(big.Int).Mul(big.NewInt(m.capacity()), big.NewInt(m.l.Window))
}

// at is the scaled token count at t: min(C·W, tokens·W + (t-t0)·Limit).
func (m *refBucket) at(t int64) *big.Int {
	c := m.full()
	if m.scaled == nil {
		return c
	}
	x := new(big.Int).Mul(big.NewInt(t-m.t0), big.NewInt(m.l.Limit))
	x.Add(x, m.scaled)
	if x.Cmp(c) > 0 {
		return c
	}
	return x
}

// used is C - floor(tokens).
func (m *refBucket) used(t int64) int64 {
	fl := new(big.Int).Div(m.at(t), big.NewInt(m.l.Window)) // Euclidean: floor for a positive divisor
	return m.capacity() - fl.Int64()
}

func (m *refBucket) horizon(now int64) int64 {
	// Full once tokens·W + (t-now)·Limit >= C·W.
	missing := new(big.Int).Sub(m.full(), m.at(now))
	return now + new(big.Int).Div(missing, big.NewInt(m.l.Limit)).Int64() + 1
}

// record takes cost tokens, never going below -C.
func (m *refBucket) record(now, cost int64) {
	x := new(big.Int).Mul(big.NewInt(cost), big.NewInt(m.l.Window))
	x.Sub(m.at(now), x)
	if floor := new(big.Int).Neg(m.full()); x.Cmp(floor) < 0 {
		x = floor
	}
	m.scaled, m.t0 = x, now
}

// newModel returns the reference of l's algorithm, empty.
func newModel(l Limit) model {
	switch l.Algorithm {
	case SlidingLog:
		return &refLog{l: l}
	case SlidingCounter, SlidingCounterWeighted:
		return &refCounter{l: l}
	case FixedWindow:
		return &refFixed{l: l}
	case TokenBucket, GCRA:
		return &refBucket{l: l}
	}
	panic("no model for " + l.Algorithm.String())
}
