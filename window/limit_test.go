package window

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	minute := 60 * sec
	for _, tc := range []struct {
		l     Limit
		field string // "" when valid
	}{
		{Limit{Algorithm: SlidingLog, Limit: 100, Window: minute}, ""},
		{Limit{Algorithm: SlidingCounter, Limit: MaxLimit, Window: MaxWindow, Buckets: 0}, ""},
		{Limit{Algorithm: SlidingCounterWeighted, Limit: 1, Window: 1024, Buckets: MaxBuckets}, ""},
		{Limit{Algorithm: FixedWindow, Limit: 20_000, Calendar: CalendarMonth}, ""},
		{Limit{Algorithm: FixedWindow, Limit: 1, Window: 1}, ""},
		{Limit{Algorithm: TokenBucket, Limit: 1, Window: MaxWindow, Burst: 10}, ""},
		{Limit{Algorithm: GCRA, Limit: 3, Window: 10, Burst: 7}, ""},

		{Limit{Algorithm: AlgorithmUnknown, Limit: 1, Window: 1}, "algorithm"},
		{Limit{Algorithm: GCRA + 1, Limit: 1, Window: 1}, "algorithm"},
		{Limit{Algorithm: TokenBucket, Limit: 0, Window: 1}, "limit"},
		{Limit{Algorithm: TokenBucket, Limit: -5, Window: 1}, "limit"},
		{Limit{Algorithm: FixedWindow, Limit: MaxLimit + 1, Window: 1}, "limit"},
		{Limit{Algorithm: SlidingLog, Limit: DefaultMaxLogLength + 1, Window: minute}, "limit"},
		{Limit{Algorithm: SlidingLog, Limit: 1, Window: 0}, "window"},
		{Limit{Algorithm: SlidingLog, Limit: 1, Window: -1}, "window"},
		{Limit{Algorithm: FixedWindow, Limit: 1, Window: MaxWindow + 1}, "window"},
		{Limit{Algorithm: FixedWindow, Limit: 1, Window: minute, Calendar: CalendarDay}, "window"},
		{Limit{Algorithm: FixedWindow, Limit: 1, Calendar: CalendarYear + 1}, "calendar"},
		{Limit{Algorithm: TokenBucket, Limit: 1, Calendar: CalendarDay}, "calendar"},
		{Limit{Algorithm: SlidingCounter, Limit: 1, Window: minute, Buckets: MaxBuckets + 1}, "buckets"},
		{Limit{Algorithm: SlidingCounter, Limit: 1, Window: minute, Buckets: -1}, "buckets"},
		{Limit{Algorithm: SlidingCounterWeighted, Limit: 1, Window: minute + 1, Buckets: 7}, "buckets"},
		{Limit{Algorithm: SlidingCounter, Limit: 1, Window: 59}, ""},  // 59 default buckets
		{Limit{Algorithm: SlidingCounter, Limit: 1, Window: sec}, ""}, // 50 default buckets
		{Limit{Algorithm: FixedWindow, Limit: 1, Window: minute, Buckets: 6}, "buckets"},
		{Limit{Algorithm: TokenBucket, Limit: 1, Window: minute, Burst: -1}, "burst"},
		{Limit{Algorithm: TokenBucket, Limit: 1, Window: minute, Burst: MaxLimit + 1}, "burst"},
		{Limit{Algorithm: SlidingLog, Limit: 1, Window: minute, Burst: 2}, "burst"},
		// An empty bucket must refill within MaxRefill.
		{Limit{Algorithm: TokenBucket, Limit: 1, Window: MaxWindow, Burst: 11}, "burst"},
		{Limit{Algorithm: GCRA, Limit: 1, Window: MaxWindow, Burst: MaxLimit}, "burst"},
	} {
		err := tc.l.Validate(0)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%+v: %v, want valid", tc.l, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want an ErrInvalid naming %q", tc.l, err, tc.field)
		}
	}
	// maxLog caps the sliding log.
	l := Limit{Algorithm: SlidingLog, Limit: 50, Window: sec}
	if err := l.Validate(49); err == nil || !strings.Contains(err.Error(), "limit: ") {
		t.Errorf("limit 50 under maxLog 49: %v", err)
	}
	if err := l.Validate(50); err != nil {
		t.Errorf("limit 50 under maxLog 50: %v", err)
	}
}

// A sliding counter asked for without buckets gets the most buckets up to
// 60 that divide its window, checked against every window up to a few
// seconds' worth of milliseconds by brute force.
func TestDefaultBucketsFor(t *testing.T) {
	for _, c := range []struct {
		window int64
		want   int32
	}{
		{60 * sec, 60}, {3600 * sec, 60}, {sec, 50}, {7 * sec, 56}, {3 * sec, 60},
		{int64(1e6), 50}, {59, 59}, {61, 1}, {1, 1}, {MaxWindow, 60},
	} {
		if got := DefaultBucketsFor(c.window); got != c.want {
			t.Errorf("DefaultBucketsFor(%d) = %d, want %d", c.window, got, c.want)
		}
	}
	for ms := int64(1); ms <= 5000; ms++ {
		w := ms * int64(1e6)
		got := DefaultBucketsFor(w)
		want := int32(0)
		for n := int32(1); n <= DefaultBuckets; n++ {
			if w%int64(n) == 0 {
				want = n
			}
		}
		if got != want || got < 50 {
			t.Fatalf("%d ms: %d buckets, want %d (and at least 50)", ms, got, want)
		}
		if err := (Limit{Algorithm: SlidingCounter, Limit: 1, Window: w}).Validate(0); err != nil {
			t.Fatalf("%d ms without buckets: %v", ms, err)
		}
	}
}

func TestCapacityAndValidateCost(t *testing.T) {
	for _, tc := range []struct {
		l        Limit
		capacity int64
	}{
		{Limit{Algorithm: SlidingLog, Limit: 5, Window: sec}, 5},
		{Limit{Algorithm: TokenBucket, Limit: 5, Window: sec}, 5},
		{Limit{Algorithm: TokenBucket, Limit: 5, Window: sec, Burst: 9}, 9},
		{Limit{Algorithm: GCRA, Limit: 5, Window: sec}, 1},
		{Limit{Algorithm: GCRA, Limit: 5, Window: sec, Burst: 3}, 3},
	} {
		if c := tc.l.Capacity(); c != tc.capacity {
			t.Errorf("%+v: capacity %d, want %d", tc.l, c, tc.capacity)
		}
		for cost, ok := range map[int64]bool{-1: false, 0: true, 1: true, tc.capacity: true, tc.capacity + 1: false} {
			err := tc.l.ValidateCost(cost)
			if (err == nil) != ok || err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "cost: ")) {
				t.Errorf("%+v: ValidateCost(%d) = %v", tc.l, cost, err)
			}
		}
	}
}

func TestNames(t *testing.T) {
	if s := SlidingCounterWeighted.String(); s != "sliding_counter_weighted" {
		t.Errorf("%q", s)
	}
	if s := Algorithm(9).String(); s != "algorithm(9)" {
		t.Errorf("%q", s)
	}
	if s := CalendarWeek.String(); s != "week" {
		t.Errorf("%q", s)
	}
	if s := Unit(9).String(); s != "unit(9)" {
		t.Errorf("%q", s)
	}
}

// Times before the epoch count as the epoch and a negative cost as a peek,
// for every algorithm (a negative bucket index would index out of range).
func TestNegativeInputs(t *testing.T) {
	for _, bl := range benchLimits() {
		l := bl.l
		var s, z State
		l.Record(&s, -5, 1)
		l.Record(&z, 0, 1)
		if s != z && l.Algorithm != SlidingLog && l.Algorithm != SlidingCounter && l.Algorithm != SlidingCounterWeighted {
			t.Errorf("%s: a record before the epoch gives %+v, at the epoch %+v", bl.name, s, z)
		}
		if got, want := l.Check(&s, -10, -3), l.Check(&z, 0, 0); got != want {
			t.Errorf("%s: Check(-10, -3) = %+v, want %+v", bl.name, got, want)
		}
	}
}

// No caller can lift a sliding log above MaxLogLength: the state machines
// rely on it to bound what one log entry can make replicas allocate.
func TestMaxLogLengthIsAHardCap(t *testing.T) {
	l := Limit{Algorithm: SlidingLog, Limit: MaxLogLength + 1, Window: 3600 * sec}
	for _, maxLog := range []int64{0, MaxLogLength, MaxLogLength + 1, 1 << 62} {
		if err := l.Validate(maxLog); err == nil {
			t.Errorf("Validate(%d) accepted a sliding log of %d", maxLog, l.Limit)
		}
	}
	l.Limit = MaxLogLength
	if err := l.Validate(1 << 62); err != nil {
		t.Errorf("a log of exactly MaxLogLength refused: %v", err)
	}
}
