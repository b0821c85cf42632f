package window_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/floodgate/floodgate/test/proptest"
	"github.com/floodgate/floodgate/window"
	"github.com/floodgate/floodgate/window/windowtest"
)

// Property tests: random limits and random request sequences, every
// Decision compared field by field with the brute-force reference, plus
// Expiry and encoding checked after every step.

func TestPropertySlidingLog(t *testing.T) { runProperty(t, window.SlidingLog, 1, 250, 120) }
func TestPropertySlidingCounter(t *testing.T) {
	runProperty(t, window.SlidingCounter, 2, 250, 120)
}
func TestPropertySlidingCounterWeighted(t *testing.T) {
	runProperty(t, window.SlidingCounterWeighted, 3, 250, 120)
}
func TestPropertyFixedWindow(t *testing.T) { runProperty(t, window.FixedWindow, 4, 250, 120) }
func TestPropertyTokenBucket(t *testing.T) { runProperty(t, window.TokenBucket, 5, 200, 100) }
func TestPropertyGCRA(t *testing.T)        { runProperty(t, window.GCRA, 6, 200, 100) }

// TestPropertyLongLog runs a few sequences at the default sliding log cap,
// where the log saturates at 10,000 timestamps.
func TestPropertyLongLog(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	for range 3 {
		l := window.Limit{Algorithm: window.SlidingLog, Limit: window.DefaultMaxLogLength, Window: windowtest.Window(rng)}
		runSeq(t, rng, l, 60, func() int64 {
			return [...]int64{0, 1, 2000, window.DefaultMaxLogLength, window.DefaultMaxLogLength + 1}[rng.IntN(5)]
		})
	}
}

func runProperty(t *testing.T, a window.Algorithm, seed uint64, seqs, ops int) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for range proptest.Runs(seqs) {
		l := windowtest.Limit(rng, a)
		if err := l.Validate(0); err != nil {
			t.Fatalf("generated an invalid limit %+v: %v", l, err)
		}
		c := l.Capacity()
		runSeq(t, rng, l, ops, func() int64 { return windowtest.Cost(rng, c) })
	}
}

// runSeq drives a State and the reference through ops random steps.
func runSeq(t *testing.T, rng *rand.Rand, l window.Limit, ops int, cost func() int64) {
	t.Helper()
	m := windowtest.New(l)
	var s window.State
	var shadow *window.State // a decoded copy, driven in lockstep
	recordDenied := rng.IntN(3) == 0
	now := windowtest.Start(rng, &l)
	var hist strings.Builder
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("limit %+v (record denied: %v)\nhistory:\n%s%s", l, recordDenied, hist.String(), fmt.Sprintf(format, args...))
	}
	for op := range ops {
		now += windowtest.Step(rng, &l, now)
		c := cost()
		if shadow == nil && rng.IntN(ops) < 3 {
			dec := roundTrip(t, &l, &s)
			shadow = &dec
		}
		if c > 0 && rng.IntN(10) == 0 {
			// Record without a Check first (Check drops aged parts).
			l.Record(&s, now, c)
			m.Record(now, c)
			if shadow != nil {
				l.Record(shadow, now, c)
			}
			fmt.Fprintf(&hist, "  op %d: now %d recorded %d unchecked\n", op, now, c)
			now += windowtest.Step(rng, &l, now)
		}
		e := l.Expiry(&s)
		got := l.Check(&s, now, c)
		if e <= now && s != (window.State{}) {
			fail("Check at %d, after the expiry %d, left %+v instead of a zero state", now, e, s)
		}
		want := windowtest.Check(m, now, c)
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
			m.Record(now, c)
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
func checkMonotone(t *testing.T, rng *rand.Rand, m windowtest.Model, now int64) {
	t.Helper()
	if msg := windowtest.Monotone(m, now, rng.Int64N); msg != "" {
		t.Fatalf("reference: %s", msg)
	}
}

// checkExpiry checks that from Expiry on s answers exactly as a zero State
// (Checks and a Record alike), and that just before it, it does not.
func checkExpiry(t *testing.T, rng *rand.Rand, l *window.Limit, s *window.State, now int64, fail func(string, ...any)) {
	t.Helper()
	e := l.Expiry(s)
	if *s == (window.State{}) {
		if e != 0 {
			fail("zero State expires at %d", e)
		}
		return
	}
	costs := []int64{0, 1, l.Capacity(), l.Capacity() + 1, rng.Int64N(l.Capacity()) + 1}
	for _, at := range []int64{max(e, now), max(e, now) + rng.Int64N(2*max(l.Window, minuteNs)+1)} {
		c, z := cloneState(l, s), window.State{}
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
		c, z := cloneState(l, s), window.State{}
		if got, want := l.Check(&c, e-1, 0), l.Check(&z, e-1, 0); got == want {
			fail("expiry %d is not the first time: at %d the state already answers as a zero state (%+v)", e, e-1, got)
		}
	}
}

// roundTrip checks that s encodes canonically, decodes (with the full
// Limit and with only its shaping fields, as snapshots do) to a State that
// re-encodes byte for byte, and returns the decoded State.
func roundTrip(t *testing.T, l *window.Limit, s *window.State) window.State {
	t.Helper()
	enc := l.AppendState([]byte("prefix"), s)
	if !bytes.HasPrefix(enc, []byte("prefix")) {
		t.Fatalf("AppendState clobbered dst")
	}
	enc = enc[len("prefix"):]
	var out window.State
	shape := window.Limit{Algorithm: l.Algorithm, Window: l.Window, Buckets: l.Buckets, Calendar: l.Calendar}
	for i, dl := range []window.Limit{*l, shape} {
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

// cloneState deep-copies s, buffer included (HeapBytes is its length).
func cloneState(l *window.Limit, s *window.State) window.State {
	c := *s
	if s.P == nil {
		return c
	}
	buf := slices.Clone(unsafe.Slice(s.P, l.HeapBytes(s)/8))
	c.P = &buf[0]
	return c
}

const minuteNs = int64(time.Minute)
