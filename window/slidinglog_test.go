package window

import (
	"testing"
	"time"
)

const sec = int64(time.Second)

// step is one request of a hand-worked example: at time at, cost, and the
// expected answer.
type step struct {
	at, cost int64
	want     Decision
}

// runSteps checks each step's answer, recording the cost when admitted.
func runSteps(t *testing.T, l Limit, steps []step) State {
	t.Helper()
	var s State
	for i, st := range steps {
		got := l.Check(&s, st.at, st.cost)
		if got != st.want {
			t.Fatalf("step %d (at %v, cost %d): got %+v, want %+v", i+1, time.Duration(st.at), st.cost, got, st.want)
		}
		if got.Allowed {
			l.Record(&s, st.at, st.cost)
		}
	}
	return s
}

// The seed example: 2 per minute, requests at 0:40, 0:50, 1:10, 1:20, 1:40.
// The log counts the last minute exactly: the third and fourth fall within
// a minute of the first two, the fifth only of the second.
func TestSlidingLogExample(t *testing.T) {
	l := Limit{Algorithm: SlidingLog, Limit: 2, Window: 60 * sec}
	runSteps(t, l, []step{
		// ResetAt is the state's before this request: a fresh key is full now.
		{40 * sec, 1, Decision{Allowed: true, Remaining: 1, ResetAt: 40 * sec}},
		{50 * sec, 0, Decision{Allowed: true, Remaining: 1, ResetAt: 100 * sec}},
		{50 * sec, 1, Decision{Allowed: true, Remaining: 0, ResetAt: 100 * sec}},
		// 0:40 leaves the window at 1:40.
		{70 * sec, 1, Decision{Remaining: 0, ResetAt: 110 * sec, RetryAfter: 30 * sec}},
		{80 * sec, 1, Decision{Remaining: 0, ResetAt: 110 * sec, RetryAfter: 20 * sec}},
		// A peek is answered like cost 1 and counts nothing.
		{100*sec - 1, 0, Decision{Remaining: 0, ResetAt: 110 * sec, RetryAfter: 1}},
		{100 * sec, 0, Decision{Allowed: true, Remaining: 1, ResetAt: 110 * sec}},
		{100 * sec, 1, Decision{Allowed: true, Remaining: 0, ResetAt: 110 * sec}},
		// Cost 2 must wait for both 0:50 (at 1:50) and 1:40 (at 2:40).
		{105 * sec, 2, Decision{Remaining: 0, ResetAt: 160 * sec, RetryAfter: 55 * sec}},
		// More than the limit can never be admitted: wait for a full reset.
		{105 * sec, 3, Decision{Remaining: 0, ResetAt: 160 * sec, RetryAfter: 55 * sec}},
	})
}

// The log keeps at most Limit timestamps, so recording denied requests
// cannot grow it without bound; the ring grows by a quarter (at least 4)
// and stops at Limit.
func TestSlidingLogSaturatesAtLimit(t *testing.T) {
	l := Limit{Algorithm: SlidingLog, Limit: 10, Window: 60 * sec}
	var s State
	caps := []int{}
	for i := range int64(25) {
		l.Record(&s, i, 1)
		r := loadLog(&s)
		if want := min(int(i)+1, 10); r.n != want {
			t.Fatalf("after %d records the log holds %d timestamps, want %d", i+1, r.n, want)
		}
		if len(caps) == 0 || caps[len(caps)-1] != len(r.buf) {
			caps = append(caps, len(r.buf))
		}
		if r.at(0) != max(i-9, 0) {
			t.Fatalf("after %d records the oldest is %d, want %d (the oldest are dropped)", i+1, r.at(0), max(i-9, 0))
		}
	}
	// A new log holds exactly its first timestamp (8 bytes: most keys see
	// one request); then 1+4 rounds up to the 48-byte size class (6 slots),
	// and 10 slots (80 bytes) fill theirs exactly: a full log of 10 costs
	// exactly 8 bytes per timestamp.
	if want := []int{1, 6, 10}; !equalInts(caps, want) {
		t.Fatalf("ring capacities %v, want %v", caps, want)
	}
	if got := l.HeapBytes(&s); got != 80 {
		t.Fatalf("HeapBytes = %d, want 80", got)
	}
	// One big record at once: still Limit timestamps, all of now.
	l.Record(&s, 100, 1000)
	if r := loadLog(&s); r.n != 10 || r.at(0) != 100 || len(r.buf) != 10 {
		t.Fatalf("after a record of 1000: %d timestamps, oldest %d, capacity %d", r.n, r.at(0), len(r.buf))
	}
}

// The ring's memory stays close to 8 bytes per timestamp while it grows.
func TestSlidingLogGrowth(t *testing.T) {
	for _, limit := range []int64{1, 3, 100, 1000, DefaultMaxLogLength} {
		l := Limit{Algorithm: SlidingLog, Limit: limit, Window: MaxWindow}
		var s State
		for i := range limit {
			l.Record(&s, i, 1)
			n := int(i) + 1
			capacity := l.HeapBytes(&s) / 8
			// Growth of a quarter (at least 4), capped at Limit, rounded up
			// to a size class (at most 1/8 more, or 16 bytes, or a page).
			bound := min(n+max(n/4, 4), int(limit))
			bound += max(bound/8, 2)
			if bound*8 > 32<<10 {
				bound += 1024 // large objects round up to 8 KiB pages
			}
			if capacity < n || capacity > bound {
				t.Fatalf("limit %d: %d timestamps in a ring of %d, want within [%d, %d]", limit, n, capacity, n, bound)
			}
		}
	}
}

// Once every timestamp has aged out, the buffer is let go.
func TestSlidingLogFreesBuffer(t *testing.T) {
	l := Limit{Algorithm: SlidingLog, Limit: 5, Window: 10}
	var s State
	l.Record(&s, 100, 3)
	if e := l.Expiry(&s); e != 110 {
		t.Fatalf("Expiry = %d, want 110", e)
	}
	if d := l.Check(&s, 109, 0); d.Remaining != 2 || s.P == nil {
		t.Fatalf("at 109: %+v, buffer %v", d, s.P)
	}
	if d := l.Check(&s, 110, 0); d.Remaining != 5 || s != (State{}) {
		t.Fatalf("at 110: %+v, state %+v, want a freed zero state", d, s)
	}
}

// A time before the newest timestamp counts as the newest's time.
func TestSlidingLogTimeBackwards(t *testing.T) {
	l := Limit{Algorithm: SlidingLog, Limit: 3, Window: 100}
	var s State
	l.Record(&s, 1000, 2)
	want := l.Check(&s, 1000, 1)
	if got := l.Check(&s, 500, 1); got != want {
		t.Fatalf("Check in the past = %+v, want %+v (as at the newest timestamp)", got, want)
	}
	l.Record(&s, 500, 1)
	if r := loadLog(&s); r.at(2) != 1000 {
		t.Fatalf("a record in the past was stored at %d, want 1000", r.at(2))
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
