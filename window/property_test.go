package window

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// Property tests: random limits and random request sequences, every
// Decision compared field by field with the brute-force reference, plus
// Expiry and encoding checked after every step.

func TestPropertySlidingLog(t *testing.T) { runProperty(t, SlidingLog, 1, 250, 120) }
func TestPropertySlidingCounter(t *testing.T) {
	runProperty(t, SlidingCounter, 2, 250, 120)
}
func TestPropertySlidingCounterWeighted(t *testing.T) {
	runProperty(t, SlidingCounterWeighted, 3, 250, 120)
}
func TestPropertyFixedWindow(t *testing.T) { runProperty(t, FixedWindow, 4, 250, 120) }
func TestPropertyTokenBucket(t *testing.T) { runProperty(t, TokenBucket, 5, 200, 100) }
func TestPropertyGCRA(t *testing.T)        { runProperty(t, GCRA, 6, 200, 100) }

// TestPropertyLongLog runs a few sequences at the default sliding log cap,
// where the log saturates at 10,000 timestamps.
func TestPropertyLongLog(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	for range 3 {
		l := Limit{Algorithm: SlidingLog, Limit: DefaultMaxLogLength, Window: genWindow(rng)}
		runSeq(t, rng, l, 60, func() int64 { return [...]int64{0, 1, 2000, DefaultMaxLogLength, DefaultMaxLogLength + 1}[rng.IntN(5)] })
	}
}

func runProperty(t *testing.T, a Algorithm, seed uint64, seqs, ops int) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	if testing.Short() {
		seqs /= 5
	}
	for range seqs {
		l := genLimit(rng, a)
		if err := l.Validate(0); err != nil {
			t.Fatalf("generated an invalid limit %+v: %v", l, err)
		}
		c := l.Capacity()
		runSeq(t, rng, l, ops, func() int64 { return genCost(rng, c) })
	}
}

// runSeq drives a State and the reference through ops random steps.
func runSeq(t *testing.T, rng *rand.Rand, l Limit, ops int, cost func() int64) {
	t.Helper()
	m := newModel(l)
	var s State
	var shadow *State // a decoded copy, driven in lockstep
	recordDenied := rng.IntN(3) == 0
	now := genStart(rng, &l)
	var hist strings.Builder
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("limit %+v (record denied: %v)\nhistory:\n%s%s", l, recordDenied, hist.String(), fmt.Sprintf(format, args...))
	}
	for op := range ops {
		now += genStep(rng, &l, now)
		c := cost()
		if shadow == nil && rng.IntN(ops) < 3 {
			dec := roundTrip(t, &l, &s)
			shadow = &dec
		}
		if c > 0 && rng.IntN(10) == 0 {
			// Record without a Check first (Check drops aged parts).
			l.Record(&s, now, c)
			m.record(now, c)
			if shadow != nil {
				l.Record(shadow, now, c)
			}
			fmt.Fprintf(&hist, "  op %d: now %d recorded %d unchecked\n", op, now, c)
			now += genStep(rng, &l, now)
		}
		e := l.Expiry(&s)
		got := l.Check(&s, now, c)
		if e <= now && s != (State{}) {
			fail("Check at %d, after the expiry %d, left %+v instead of a zero state", now, e, s)
		}
		want := refCheck(m, now, c)
		fmt.Fprintf(&hist, "  op %d: now %d cost %d -> %+v\n", op, now, c, got)
		if got != want {
			fail("Check(now %d, cost %d)\n got %+v\nwant %+v", now, c, got, want)
		}
		if shadow != nil {
			if sd := l.Check(shadow, now, c); sd != got {
				fail("decoded copy: Check = %+v, original %+v", sd, got)
			}
		}
		if c > 0 && (got.Allowed || recordDenied) {
			l.Record(&s, now, c)
			m.record(now, c)
			if shadow != nil {
				l.Record(shadow, now, c)
			}
			fmt.Fprintf(&hist, "  recorded\n")
		}
		checkMonotone(t, rng, m, now)
		checkExpiry(t, rng, &l, &s, now, fail)
		enc := roundTrip(t, &l, &s)
		if shadow != nil && !bytes.Equal(l.AppendState(nil, shadow), l.AppendState(nil, &enc)) {
			fail("decoded copy encodes as %x, original %x", l.AppendState(nil, shadow), l.AppendState(nil, &s))
		}
	}
}

// checkMonotone checks the reference's premise: with nothing recorded,
// used never increases.
func checkMonotone(t *testing.T, rng *rand.Rand, m model, now int64) {
	t.Helper()
	h := m.horizon(now)
	t1 := now + rng.Int64N(h-now+1)
	t2 := t1 + rng.Int64N(h-t1+1)
	if u1, u2 := m.used(t1), m.used(t2); u1 < u2 || m.used(h) != 0 {
		t.Fatalf("reference: used(%d)=%d < used(%d)=%d, or used(horizon %d)=%d", t1, u1, t2, u2, h, m.used(h))
	}
}

// checkExpiry checks that from Expiry on s answers exactly as a zero State
// (Checks and a Record alike), and that just before it, it does not.
func checkExpiry(t *testing.T, rng *rand.Rand, l *Limit, s *State, now int64, fail func(string, ...any)) {
	t.Helper()
	e := l.Expiry(s)
	if *s == (State{}) {
		if e != 0 {
			fail("zero State expires at %d", e)
		}
		return
	}
	costs := []int64{0, 1, l.Capacity(), l.Capacity() + 1, rng.Int64N(l.Capacity()) + 1}
	for _, at := range []int64{max(e, now), max(e, now) + rng.Int64N(2*max(l.Window, minuteNs)+1)} {
		c, z := cloneState(l, s), State{}
		for _, cost := range costs {
			if got, want := l.Check(&c, at, cost), l.Check(&z, at, cost); got != want {
				fail("expiry %d: at %d cost %d the state answers %+v, a zero state %+v", e, at, cost, got, want)
			}
		}
		cost := costs[rng.IntN(len(costs))] + 1
		l.Record(&c, at, cost)
		l.Record(&z, at, cost)
		if got, want := l.AppendState(nil, &c), l.AppendState(nil, &z); !bytes.Equal(got, want) {
			fail("expiry %d: after recording %d at %d the state encodes %x, a zero state %x", e, cost, at, got, want)
		}
	}
	if e-1 >= now {
		c, z := cloneState(l, s), State{}
		if got, want := l.Check(&c, e-1, 0), l.Check(&z, e-1, 0); got == want {
			fail("expiry %d is not the first time: at %d the state already answers as a zero state (%+v)", e, e-1, got)
		}
	}
}

// roundTrip checks that s encodes canonically, decodes (with the full
// Limit and with only its shaping fields, as snapshots do) to a State that
// re-encodes byte for byte, and returns the decoded State.
func roundTrip(t *testing.T, l *Limit, s *State) State {
	t.Helper()
	enc := l.AppendState([]byte("prefix"), s)
	if !bytes.HasPrefix(enc, []byte("prefix")) {
		t.Fatalf("AppendState clobbered dst")
	}
	enc = enc[len("prefix"):]
	var out State
	shape := Limit{Algorithm: l.Algorithm, Window: l.Window, Buckets: l.Buckets, Calendar: l.Calendar}
	for i, dl := range []Limit{*l, shape} {
		dec, n, err := dl.DecodeState(append(slices.Clip(enc), 0xff, 0x01))
		if err != nil || n != len(enc) {
			t.Fatalf("DecodeState(%x) with %+v = %d bytes, %v; want %d bytes", enc, dl, n, err, len(enc))
		}
		if re := l.AppendState(nil, &dec); !bytes.Equal(re, enc) {
			t.Fatalf("re-encoding: %x, first encoding %x", re, enc)
		}
		if i == 0 {
			out = dec
		}
	}
	return out
}

// cloneState deep-copies s, buffer included.
func cloneState(l *Limit, s *State) State {
	c := *s
	if s.P == nil {
		return c
	}
	var words int
	switch l.Algorithm {
	case SlidingLog:
		words = len(loadLog(s).buf)
	case SlidingCounter, SlidingCounterWeighted:
		words = shapeOf(l).words()
	}
	buf := slices.Clone(unsafe.Slice(s.P, words))
	c.P = &buf[0]
	return c
}

// genLimit returns a random valid Limit of algorithm a, favoring edges:
// tiny and maximal windows and limits, windows that are not multiples of
// the limit, one bucket and MaxBuckets.
func genLimit(rng *rand.Rand, a Algorithm) Limit {
	l := Limit{Algorithm: a}
	switch a {
	case SlidingLog:
		l.Limit, l.Window = genCount(rng, 200), genWindow(rng)
	case SlidingCounter, SlidingCounterWeighted:
		n := [...]int64{1, 2, 3, 10, 60, MaxBuckets, rng.Int64N(100) + 1}[rng.IntN(7)]
		b := [...]int64{1, rng.Int64N(20) + 1, rng.Int64N(1000) + 1, int64(time.Second), MaxWindow / n, rng.Int64N(MaxWindow/n) + 1}[rng.IntN(6)]
		l.Window, l.Buckets = n*b, int32(n)
		if n == DefaultBuckets && rng.IntN(2) == 0 {
			l.Buckets = 0
		}
		l.Limit = genCount(rng, MaxLimit)
	case FixedWindow:
		if rng.IntN(5) < 2 {
			l.Calendar = Unit(rng.IntN(int(CalendarYear)) + 1)
		} else {
			l.Window = genWindow(rng)
		}
		l.Limit = genCount(rng, MaxLimit)
	case TokenBucket, GCRA:
		for {
			l.Limit, l.Window, l.Burst = genCount(rng, MaxLimit), genWindow(rng), 0
			if rng.IntN(5) < 3 {
				l.Burst = genCount(rng, MaxLimit)
			}
			if l.Validate(0) == nil {
				break
			}
		}
	}
	return l
}

func genWindow(rng *rand.Rand) int64 {
	switch rng.IntN(7) {
	case 0:
		return rng.Int64N(40) + 1
	case 1:
		return rng.Int64N(3000) + 1
	case 2:
		return [...]int64{int64(time.Second), minuteNs, hourNs, dayNs, MaxWindow}[rng.IntN(5)]
	case 3:
		return rng.Int64N(MaxWindow) + 1
	case 4:
		return MaxWindow - rng.Int64N(1000)
	default:
		return rng.Int64N(minuteNs) + 1
	}
}

// genCount is in [1, hi], favoring the ends.
func genCount(rng *rand.Rand, hi int64) int64 {
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

// genCost favors peeks, unit costs and the capacity; one in twelve is
// more than the capacity, which no request can ever get.
func genCost(rng *rand.Rand, capacity int64) int64 {
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

// interesting starting times for calendar periods: leap and non-leap
// Februaries (2100 is not a leap year), year ends, a Sunday before a
// Monday.
func calendarStarts() []time.Time {
	return []time.Time{
		time.Date(2024, 2, 28, 23, 0, 0, 0, time.UTC),
		time.Date(2025, 2, 28, 23, 0, 0, 0, time.UTC),
		time.Date(2100, 2, 28, 23, 0, 0, 0, time.UTC),
		time.Date(2024, 12, 31, 23, 59, 0, 0, time.UTC),
		time.Date(2023, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2026, 1, 4, 23, 59, 0, 0, time.UTC),
	}
}

func genStart(rng *rand.Rand, l *Limit) int64 {
	if l.Calendar != CalendarNone && rng.IntN(2) == 0 {
		return calendarStarts()[rng.IntN(len(calendarStarts()))].UnixNano() - rng.Int64N(int64(time.Hour))
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

// genStep advances time: often not at all, by a nanosecond, by up to the
// algorithm's natural unit, onto a boundary (and one off it), or by
// several windows at once.
func genStep(rng *rand.Rand, l *Limit, now int64) int64 {
	if now > 6e18 {
		return rng.Int64N(2)
	}
	w, unit := l.Window, l.Window
	switch l.Algorithm {
	case SlidingCounter, SlidingCounterWeighted:
		unit = l.Window / int64(l.buckets())
	case TokenBucket, GCRA, SlidingLog:
		unit = max(l.Window/l.Limit, 1)
	case FixedWindow:
		if l.Calendar != CalendarNone {
			w = PeriodEnd(l.Calendar, now) - PeriodStart(l.Calendar, now)
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
		step := unit - floorMod(now, unit, 0)
		if l.Calendar != CalendarNone {
			step = PeriodEnd(l.Calendar, now) - now
		}
		return max(step+rng.Int64N(3)-1, 0)
	case 7:
		return w + rng.Int64N(3*w+1)
	}
	return rng.Int64N(3*unit + 1)
}
