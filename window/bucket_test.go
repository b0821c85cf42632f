package window

import (
	"math"
	"testing"
)

const ms = sec / 1000

// 10 per second in a bucket of 10: one token every 100 ms.
func TestTokenBucketExample(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 10, Window: sec}
	runSteps(t, l, []step{
		{0, 10, Decision{Allowed: true, Remaining: 0, ResetAt: 0}},
		{0, 1, Decision{Remaining: 0, ResetAt: sec, RetryAfter: 100 * ms}},
		{100 * ms, 1, Decision{Allowed: true, Remaining: 0, ResetAt: sec}},
		// 9.5 tokens missing count as 10: cost 2 waits for 8 missing.
		{150 * ms, 2, Decision{Remaining: 0, ResetAt: 1100 * ms, RetryAfter: 150 * ms}},
		{300 * ms, 2, Decision{Allowed: true, Remaining: 0, ResetAt: 1100 * ms}},
		{1300 * ms, 0, Decision{Allowed: true, Remaining: 10, ResetAt: 1300 * ms}},
	})
}

// 3 per 10 ns: a token every 3⅓ ns, kept exact.
func TestTokenBucketFractional(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 3, Window: 10}
	var s State
	l.Record(&s, 0, 1)
	if s.A != 3 || s.B != 1 || l.Expiry(&s) != 4 {
		t.Fatalf("one token: TAT %d+%d/3, expiry %d; want 3+1/3, 4", s.A, s.B, l.Expiry(&s))
	}
	l.Record(&s, 0, 2)
	if s.A != 10 || s.B != 0 {
		t.Fatalf("three tokens: TAT %d+%d/3, want exactly 10", s.A, s.B)
	}
	// At 4: 1.8 tokens missing, so 2 used; cost 2 fits once at most 1
	// token is missing, from 10 - 3⅓ = 6⅔, so at 7.
	if got, want := l.Check(&s, 4, 2), (Decision{Remaining: 1, ResetAt: 10, RetryAfter: 3}); got != want {
		t.Fatalf("at 4: %+v, want %+v", got, want)
	}
	if d := l.Check(&s, 6, 2); d.Allowed {
		t.Fatalf("at 6: %+v, want denied", d)
	}
	if d := l.Check(&s, 7, 2); !d.Allowed {
		t.Fatalf("at 7: %+v, want admitted", d)
	}
}

// Sub-nanosecond remainders carry: 3 per second is 333,333,333⅓ ns a
// token, and taking tokens one at a time lands exactly where taking them
// at once does, with no drift however many are taken.
func TestTokenBucketNoDrift(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 3, Window: sec, Burst: 1_000_000}
	var one, all State
	for range 999_999 {
		l.Record(&one, 0, 1)
	}
	l.Record(&all, 0, 999_999)
	if one != all || one.A != 333_333*sec || one.B != 0 {
		t.Fatalf("one by one: %+v, at once: %+v, want TAT exactly 333333 s", one, all)
	}
	if d := l.Check(&one, 0, 0); d.ResetAt != 333_333*sec {
		t.Fatalf("ResetAt = %d", d.ResetAt)
	}
}

// Recording far more than the bucket holds (a policy counting denied
// requests, or a huge cost) leaves at most C tokens owed.
func TestTokenBucketDebtBounded(t *testing.T) {
	for _, cost := range []int64{21, 1000, math.MaxInt64} {
		l := Limit{Algorithm: TokenBucket, Limit: 10, Window: sec}
		var s State
		l.Record(&s, 0, cost)
		want := Decision{Remaining: 0, ResetAt: 2 * sec, RetryAfter: 1100 * ms}
		if d := l.Check(&s, 0, 1); d != want || l.Expiry(&s) != 2*sec {
			t.Fatalf("after recording %d: %+v, expiry %d; want %+v, expiry 2s", cost, d, l.Expiry(&s), want)
		}
	}
}

// GCRA with Limit 1 per second: requests at least a second apart, with a
// burst tolerance of Burst requests.
func TestGCRAExample(t *testing.T) {
	l := Limit{Algorithm: GCRA, Limit: 1, Window: sec}
	runSteps(t, l, []step{
		{0, 1, Decision{Allowed: true, Remaining: 0, ResetAt: 0}},
		{500 * ms, 1, Decision{Remaining: 0, ResetAt: sec, RetryAfter: 500 * ms}},
		{sec, 1, Decision{Allowed: true, Remaining: 0, ResetAt: sec}},
		// A cost above the burst can never pass.
		{sec, 2, Decision{Remaining: 0, ResetAt: 2 * sec, RetryAfter: sec}},
	})
	burst := Limit{Algorithm: GCRA, Limit: 1, Window: sec, Burst: 3}
	runSteps(t, burst, []step{
		{0, 1, Decision{Allowed: true, Remaining: 2, ResetAt: 0}},
		{0, 1, Decision{Allowed: true, Remaining: 1, ResetAt: sec}},
		{0, 1, Decision{Allowed: true, Remaining: 0, ResetAt: 2 * sec}},
		{0, 1, Decision{Remaining: 0, ResetAt: 3 * sec, RetryAfter: sec}},
		{1500 * ms, 2, Decision{Remaining: 1, ResetAt: 3 * sec, RetryAfter: 500 * ms}},
	})
}

// The limit's value is not part of a state's identity, so a State may meet
// a different Limit or Burst than it was recorded under: the answers must
// stay sane, with no overflow.
func TestBucketLimitChange(t *testing.T) {
	old := Limit{Algorithm: TokenBucket, Limit: 7, Window: 10, Burst: 100}
	var s State
	l := old
	l.Record(&s, 1000, 150)
	for _, nl := range []Limit{
		{Algorithm: TokenBucket, Limit: 2, Window: 10},
		{Algorithm: TokenBucket, Limit: 1, Window: 10},
		{Algorithm: TokenBucket, Limit: MaxLimit, Window: 10},
		{Algorithm: GCRA, Limit: MaxLimit, Window: 10, Burst: MaxLimit},
	} {
		c := s
		d := nl.Check(&c, 1000, 1)
		if d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 || d.ResetAt <= 1000 {
			t.Fatalf("%+v: %+v", nl, d)
		}
		nl.Record(&c, 1001, 1)
		if e := nl.Expiry(&c); e <= 1001 {
			t.Fatalf("%+v: expiry %d", nl, e)
		}
	}
}

// A fraction recorded under a larger Limit answers as the largest
// fraction the current Limit has.
func TestBucketFractionClamped(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 7, Window: 30}
	for _, b := range []int64{7, 8, 1000} {
		for now := int64(40); now <= 101; now++ {
			for cost := range int64(9) {
				over, top := State{A: 100, B: b}, State{A: 100, B: 6}
				if got, want := l.Check(&over, now, cost), l.Check(&top, now, cost); got != want {
					t.Fatalf("fraction %d/7 at %d cost %d: %+v, want %+v as for 6/7", b, now, cost, got, want)
				}
			}
		}
	}
}

// A bucket read with a limit under which its sub-nanosecond fraction
// rounds away (a stretched limit read unstretched) looks full, but a Check
// must not forget it: read again with the limit it was written with, it is
// still half a nanosecond from full.
func TestBucketCheckForgetsOnlyWhatIsFullUnderEveryLimit(t *testing.T) {
	written := Limit{Algorithm: GCRA, Limit: 2, Window: 3}
	other := written
	other.Limit = 1
	var s State
	written.Record(&s, 0, 1) // TAT 1.5: A 1, B 1 (halves)
	if d := other.Check(&s, 1, 1); !d.Allowed {
		t.Fatalf("read with limit 1 at 1: %+v, want allowed (TAT reads as 1)", d)
	}
	if d := written.Check(&s, 1, 1); d.Allowed {
		t.Fatalf("read again with limit 2 at 1: %+v, want denied (TAT is 1.5)", d)
	}
}
