package windowtest

import (
	"maps"
	"math"
	"math/big"
	"slices"
	"time"

	"github.com/floodgate/floodgate/window"
)

// slidingLog: every recorded timestamp, trimmed to the newest Limit.
type slidingLog struct {
	l  window.Limit
	ts []int64
}

func (m *slidingLog) Capacity() int64         { return m.l.Limit }
func (m *slidingLog) Linear() int64           { return 1024 }
func (m *slidingLog) SetLimit(l window.Limit) { m.l = l }

func (m *slidingLog) Used(t int64) int64 {
	n := int64(0)
	for _, x := range m.ts {
		if x > t-m.l.Window {
			n++
		}
	}
	return n
}

func (m *slidingLog) Horizon(now int64) int64 {
	if len(m.ts) == 0 {
		return now
	}
	return max(now, slices.Max(m.ts)+m.l.Window)
}

func (m *slidingLog) Record(now, cost int64) {
	for range min(cost, m.l.Limit) {
		m.ts = append(m.ts, now)
	}
	if over := int64(len(m.ts)) - m.l.Limit; over > 0 {
		m.ts = m.ts[over:]
	}
}

// exactLog: every recorded (time, cost), untrimmed.
type exactLog struct {
	l    window.Limit
	recs [][2]int64
}

func (m *exactLog) Capacity() int64         { return m.l.Limit }
func (m *exactLog) Linear() int64           { return 1024 }
func (m *exactLog) SetLimit(l window.Limit) { m.l = l }

func (m *exactLog) Used(t int64) int64 {
	n := int64(0)
	for _, r := range m.recs {
		if r[0] > t-m.l.Window {
			n += r[1]
		}
	}
	return n
}

func (m *exactLog) Horizon(now int64) int64 {
	if len(m.recs) == 0 {
		return now
	}
	return max(now, m.recs[len(m.recs)-1][0]+m.l.Window)
}

func (m *exactLog) Record(now, cost int64) {
	// Records out of the window now are out of every later one.
	m.recs = slices.DeleteFunc(m.recs, func(r [2]int64) bool { return r[0] <= now-m.l.Window })
	m.recs = append(m.recs, [2]int64{now, cost})
}

// counter: a map from bucket index to count, for both sliding counters.
type counter struct {
	l      window.Limit
	counts map[int64]uint64
}

func (m *counter) Capacity() int64         { return m.l.Limit }
func (m *counter) Linear() int64           { return 1024 }
func (m *counter) SetLimit(l window.Limit) { m.l = l }
func (m *counter) n() int64                { return int64(Buckets(&m.l)) }
func (m *counter) b() int64                { return m.l.Window / m.n() }

// Buckets is the effective bucket count of a sliding counter Limit: when
// none is set, the most up to 60 that divide the window, found here by
// trying them all rather than by the rule under test.
func Buckets(l *window.Limit) int {
	if l.Buckets != 0 {
		return int(l.Buckets)
	}
	best := 1
	for n := 1; n <= 60; n++ {
		if l.Window%int64(n) == 0 {
			best = n
		}
	}
	return best
}

func (m *counter) Used(t int64) int64 {
	b, n := m.b(), m.n()
	cur := t / b
	var sum uint64
	for i, c := range m.counts {
		if i > cur-n && i <= cur {
			sum += c
		}
	}
	if m.l.Algorithm == window.SlidingCounterWeighted {
		// ceil(count·(b-o)/b) in big integers.
		x := new(big.Int).SetUint64(m.counts[cur-n])
		x.Mul(x, big.NewInt(b-(t-cur*b)))
		x.Add(x, big.NewInt(b-1))
		x.Quo(x, big.NewInt(b))
		sum += x.Uint64()
	}
	return int64(sum)
}

func (m *counter) Horizon(now int64) int64 {
	if len(m.counts) == 0 {
		return now
	}
	k := m.n()
	if m.l.Algorithm == window.SlidingCounterWeighted {
		k++
	}
	newest := slices.Max(slices.Collect(maps.Keys(m.counts)))
	return max(now, (newest+k)*m.b())
}

func (m *counter) Record(now, cost int64) {
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

// fixed: every record, with its period found through package time.
type fixed struct {
	l    window.Limit
	recs [][2]int64 // time, cost
}

func (m *fixed) Capacity() int64         { return m.l.Limit }
func (m *fixed) Linear() int64           { return 1024 }
func (m *fixed) SetLimit(l window.Limit) { m.l = l }

func (m *fixed) Used(t int64) int64 {
	start, _ := Period(&m.l, t)
	n := int64(0)
	for _, r := range m.recs {
		if s, _ := Period(&m.l, r[0]); s == start {
			n += r[1]
		}
	}
	return n
}

func (m *fixed) Horizon(now int64) int64 {
	_, end := Period(&m.l, now)
	return end
}

func (m *fixed) Record(now, cost int64) {
	// Earlier periods never count again: keep only now's.
	start, _ := Period(&m.l, now)
	m.recs = slices.DeleteFunc(m.recs, func(r [2]int64) bool {
		s, _ := Period(&m.l, r[0])
		return s != start
	})
	m.recs = append(m.recs, [2]int64{now, cost})
}

// Period is the period of l containing t: epoch-aligned multiples of
// Window, or calendar periods found with Time.Truncate (the zero Time,
// January 1 of year 1, is a Monday, so week truncation gives ISO weeks)
// and AddDate, never with window's own calendar code.
func Period(l *window.Limit, t int64) (start, end int64) {
	if l.Calendar == window.CalendarNone {
		k := t / l.Window
		return k * l.Window, (k + 1) * l.Window
	}
	tm := time.Unix(0, t).UTC()
	var s, e time.Time
	switch l.Calendar {
	case window.CalendarMinute:
		s = tm.Truncate(time.Minute)
		e = s.Add(time.Minute)
	case window.CalendarHour:
		s = tm.Truncate(time.Hour)
		e = s.Add(time.Hour)
	case window.CalendarDay:
		s = tm.Truncate(24 * time.Hour)
		e = s.AddDate(0, 0, 1)
	case window.CalendarWeek:
		s = tm.Truncate(7 * 24 * time.Hour)
		e = s.AddDate(0, 0, 7)
	case window.CalendarMonth:
		s = time.Date(tm.Year(), tm.Month(), 1, 0, 0, 0, 0, time.UTC)
		e = s.AddDate(0, 1, 0)
	case window.CalendarYear:
		s = time.Date(tm.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
		e = s.AddDate(1, 0, 0)
	}
	return s.UnixNano(), e.UnixNano()
}
