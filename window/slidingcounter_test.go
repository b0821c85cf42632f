package window

import (
	"math"
	"testing"
)

// Six ten-second buckets in a minute, 5 per minute: cost 2 in bucket 0,
// cost 3 in bucket 2. The plain counter forgets bucket 0 all at once at
// 1:00, when it leaves the six newest buckets.
func TestSlidingCounterExample(t *testing.T) {
	l := Limit{Algorithm: SlidingCounter, Limit: 5, Window: 60 * sec, Buckets: 6}
	runSteps(t, l, []step{
		{5 * sec, 2, Decision{Allowed: true, Remaining: 3, ResetAt: 5 * sec}},
		{25 * sec, 3, Decision{Allowed: true, Remaining: 0, ResetAt: 60 * sec}},
		{55 * sec, 1, Decision{Remaining: 0, ResetAt: 80 * sec, RetryAfter: 5 * sec}},
		// Cost 3 needs bucket 2 gone too: at 1:20.
		{55 * sec, 3, Decision{Remaining: 0, ResetAt: 80 * sec, RetryAfter: 25 * sec}},
		{60*sec - 1, 0, Decision{Remaining: 0, ResetAt: 80 * sec, RetryAfter: 1}},
		{60 * sec, 2, Decision{Allowed: true, Remaining: 0, ResetAt: 80 * sec}},
		{80 * sec, 0, Decision{Allowed: true, Remaining: 3, ResetAt: 120 * sec}},
	})
}

// The weighted counter with one bucket is the classic sliding window
// estimate: the previous window's count weighted by how much of it still
// overlaps the last Window.
func TestSlidingCounterWeightedExample(t *testing.T) {
	l := Limit{Algorithm: SlidingCounterWeighted, Limit: 10, Window: 60 * sec, Buckets: 1}
	var s State
	l.Record(&s, 10*sec, 8) // previous window
	l.Record(&s, 65*sec, 3) // current window
	// At 1:15, 45 of the previous 60 s still overlap: 3 + ceil(8·45/60) = 9.
	if got, want := l.Check(&s, 75*sec, 1), (Decision{Allowed: true, Remaining: 0, ResetAt: 180 * sec}); got != want {
		t.Fatalf("cost 1 at 1:15: %+v, want %+v", got, want)
	}
	// Cost 2 needs ceil(8·(60-o)/60) <= 5: o >= 22.5 s, at 1:22.5.
	if got, want := l.Check(&s, 75*sec, 2), (Decision{Remaining: 1, ResetAt: 180 * sec, RetryAfter: 7500 * 1e6}); got != want {
		t.Fatalf("cost 2 at 1:15: %+v, want %+v", got, want)
	}
	if d := l.Check(&s, 82500*1e6-1, 2); d.Allowed {
		t.Fatalf("cost 2 admitted 1ns early: %+v", d)
	}
	if d := l.Check(&s, 82500*1e6, 2); !d.Allowed {
		t.Fatalf("cost 2 denied at 1:22.5: %+v", d)
	}
	// Cost 8 needs used <= 2: only once the current window (3) is the
	// previous one, weighted ceil(3·(60-o)/60) <= 2, o >= 20 s: at 2:20.
	if got := l.Check(&s, 75*sec, 8); got.RetryAfter != 65*sec {
		t.Fatalf("cost 8 at 1:15: %+v, want RetryAfter 65s", got)
	}
	// The ceiling never under-counts: 1ns before 2:00, 8·1/60e9 rounds up
	// to 1.
	if d := l.Check(&s, 120*sec-1, 0); d.Remaining != 10-3-1 {
		t.Fatalf("1ns before 2:00: %+v, want Remaining 6", d)
	}
}

// Counts are uint32s that saturate instead of wrapping, even when a policy
// records every denied request of a hot key at the largest limit.
func TestSlidingCounterSaturates(t *testing.T) {
	for _, a := range []Algorithm{SlidingCounter, SlidingCounterWeighted} {
		l := Limit{Algorithm: a, Limit: MaxLimit, Window: 60 * sec, Buckets: 2}
		var s State
		for range 10 {
			l.Record(&s, 0, MaxLimit)
		}
		slots := shapeOf(&l).slots(&s)
		if slots[0] != math.MaxUint32 || s.B != math.MaxUint32 {
			t.Fatalf("%s: bucket %d, total %d, want both saturated at %d", a, slots[0], s.B, uint32(math.MaxUint32))
		}
		// The plain counter forgets bucket 0 at 60 s; the weighted one
		// waits until ceil(MaxUint32·(b-o)/b) <= MaxLimit-1, o >= b - 6.98 s.
		want := Decision{ResetAt: 60 * sec, RetryAfter: 60 * sec}
		if a == SlidingCounterWeighted {
			q, _, _ := mulDiv(uint64(MaxLimit-1), uint64(30*sec), math.MaxUint32)
			want = Decision{ResetAt: 90 * sec, RetryAfter: 90*sec - int64(q)}
		}
		if d := l.Check(&s, 0, 1); d != want {
			t.Fatalf("%s: %+v, want %+v", a, d, want)
		}
	}
}

// Bucket and ring sizes, and the cached total kept in step when buckets
// rotate out without a Check in between.
func TestSlidingCounterLayout(t *testing.T) {
	for _, tc := range []struct {
		a       Algorithm
		buckets int32
		bytes   int
	}{
		{SlidingCounter, 0, 240},
		{SlidingCounter, 10, 40},
		{SlidingCounterWeighted, 60, 248},
		{SlidingCounterWeighted, 1, 8},
		{SlidingCounter, MaxBuckets, 4096},
	} {
		l := Limit{Algorithm: tc.a, Limit: 100, Window: 3600 * sec, Buckets: tc.buckets}
		var s State
		if l.HeapBytes(&s) != 0 {
			t.Fatalf("a zero state holds memory")
		}
		b := l.Window / int64(l.buckets())
		for i := range int64(3 * l.buckets()) {
			l.Record(&s, i*b, 1)
		}
		if got := l.HeapBytes(&s); got != tc.bytes {
			t.Fatalf("%s/%d: HeapBytes = %d, want %d", tc.a, tc.buckets, got, tc.bytes)
		}
		k := int64(l.buckets())
		if tc.a == SlidingCounterWeighted {
			k++
		}
		if s.B != k {
			t.Fatalf("%s/%d: total %d, want %d (one per bucket in the ring)", tc.a, tc.buckets, s.B, k)
		}
	}
}

// A Check after everything aged out frees the buffer; a Record reuses it.
func TestSlidingCounterFreesBuffer(t *testing.T) {
	l := Limit{Algorithm: SlidingCounterWeighted, Limit: 10, Window: 100, Buckets: 4}
	var s State
	l.Record(&s, 30, 2) // bucket 1
	if e := l.Expiry(&s); e != 150 {
		t.Fatalf("Expiry = %d, want 150 (bucket 1 weighs in until bucket 6)", e)
	}
	p := s.P
	l.Record(&s, 1000, 1)
	if s.P != p || s.B != 1 {
		t.Fatalf("Record after everything aged out: buffer %p (was %p), total %d", s.P, p, s.B)
	}
	if d := l.Check(&s, 1125, 0); d.Remaining != 10 || s != (State{}) {
		t.Fatalf("Check after expiry: %+v, state %+v, want a freed zero state", d, s)
	}
}

// A time before the newest bucket counts as that bucket's start.
func TestSlidingCounterTimeBackwards(t *testing.T) {
	l := Limit{Algorithm: SlidingCounterWeighted, Limit: 10, Window: 100, Buckets: 4}
	var s State
	l.Record(&s, 10, 3)
	l.Record(&s, 260, 4)
	want := l.Check(&s, 250, 1)
	if got := l.Check(&s, 100, 1); got != want {
		t.Fatalf("Check in the past = %+v, want %+v", got, want)
	}
	l.Record(&s, 100, 1)
	if slots := shapeOf(&l).slots(&s); slots[10%5] != 5 {
		t.Fatalf("a record in the past went to slot counts %v, want 5 in the newest bucket", slots)
	}
}

// TestSlidingCounterAtEndOfTime: a counter of 1ns buckets recording at
// math.MaxInt64 panicked (index out of range), or with one bucket looped
// forever: the rotation's index could not pass bucket math.MaxInt64, so
// it wrapped around. Either stops the state machine applying it.
func TestSlidingCounterAtEndOfTime(t *testing.T) {
	for _, a := range []Algorithm{SlidingCounter, SlidingCounterWeighted} {
		l := Limit{Algorithm: a, Limit: 10, Window: 4, Buckets: 4}
		var s State
		l.Record(&s, math.MaxInt64-2, 1)
		l.Record(&s, math.MaxInt64, 2)
		if d := l.Check(&s, math.MaxInt64, 1); d.Remaining != 6 {
			t.Fatalf("%s: at the end of time %+v, want 6 remaining (3 counted, 1 asked)", a, d)
		}
	}
}
