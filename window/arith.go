package window

import (
	"math"
	"math/bits"
	"time"
)

// mulDiv returns a*b/d and a*b mod d computed on the full 128-bit product,
// so cost × Window or tokens × Window never overflow. ok is false (and q, r
// zero) when the quotient does not fit in 64 bits or d is zero: callers
// treat that as "more than anything representable" instead of panicking
// as bits.Div64 would.
func mulDiv(a, b, d uint64) (q, r uint64, ok bool) {
	hi, lo := bits.Mul64(a, b)
	if hi >= d {
		return 0, 0, false
	}
	q, r = bits.Div64(hi, lo, d)
	return q, r, true
}

// satAdd returns a+b for b >= 0, saturating at math.MaxInt64 so times near
// the end of the int64 range clamp instead of wrapping into the past.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// decide builds the Decision shared by every algorithm from what the state
// has used of capacity at now, and when it is back to full capacity. A
// denied request's RetryAfter is set to the fallback for a cost that can
// never fit (the time until the state is full again, at least 1ns); callers
// overwrite it with the exact wait when the cost fits the capacity.
func decide(capacity, used, cost, now, resetAt int64) Decision {
	c := max(cost, 1) // a peek asks whether one more unit fits
	d := Decision{ResetAt: resetAt}
	// used may exceed capacity (recorded denials, a lowered limit), so
	// compare without adding to it.
	d.Allowed = c <= capacity && used <= capacity-c
	rem := capacity - used
	if d.Allowed {
		rem -= cost
	}
	d.Remaining = max(rem, 0)
	if !d.Allowed {
		d.RetryAfter = max(resetAt-now, 1)
	}
	return d
}

// fits reports whether a denied request's cost could ever be admitted, so
// its exact RetryAfter exists.
func fits(capacity, cost int64) bool {
	return max(cost, 1) <= capacity
}

// waitFrom makes a denial's RetryAfter, measured from now, a wait from
// asked <= now: a sliding algorithm asked at a time before the newest it
// holds answers as at that newest time, and a client told to wait from
// the earlier time would be refused when it comes back.
func waitFrom(d Decision, now, asked int64) Decision {
	if !d.Allowed {
		d.RetryAfter = satAdd(d.RetryAfter, now-asked)
	}
	return d
}

// CeilSeconds is d in whole seconds, rounded up; 0 for d <= 0: how long
// until a reset or a retry is told to clients that read whole seconds
// (HTTP's Retry-After and RateLimit headers, Envoy's X-RateLimit-Reset),
// so that none is told to come back before it may. It rounds without
// adding to d, which would overflow for the longest durations
// (math.MaxInt64 is x/time/rate's InfDuration, "never").
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
