package window

import (
	"math"
	"math/bits"
)

// TokenBucket and GCRA are the same meter: a bucket of C = Capacity()
// tokens refilled continuously at Limit tokens per Window, where GCRA's
// emission interval T = Window/Limit is the refill time of one token and
// its burst tolerance is the capacity. Both keep the "theoretical arrival
// time" (TAT), the moment the bucket is full again if nothing more is
// taken:
//
//	A  TAT's whole nanoseconds (Unix)
//	B  TAT's fraction of a nanosecond, in units of 1/Limit ns: 0 <= B < Limit
//	P  nil
//
// At time now the bucket holds C - (TAT-now)·Limit/Window tokens (C once
// TAT <= now), so it uses ceil((TAT-now)·Limit/Window) of its capacity.
// Taking c tokens moves TAT to max(TAT, now) + c·Window/Limit, computed
// exactly on 128-bit products with the sub-nanosecond remainder carried in
// B, so no rounding ever accumulates.
//
// Recording cost the bucket does not hold (a policy that also counts
// denied requests) drives the token count negative, but never below -C:
// TAT stays at most 2C·Window/Limit <= 2·MaxRefill after now, so it stays
// finite and a client that stops sending is forgiven within twice the
// refill time. The zero State, TAT = 0, is a full bucket.

// rate is a bucket Limit as unsigned operands for mulDiv.
type rate struct {
	limit, window, capacity uint64
}

func bucketRate(l *Limit) rate {
	return rate{limit: uint64(l.Limit), window: uint64(l.Window), capacity: uint64(l.Capacity())}
}

// tat returns s's TAT with B clamped into [0, Limit). B is out of range
// only when the Limit's value changed under a stored State (a stretched or
// edited limit; the value is not part of the state's identity): clamping
// keeps the arithmetic exact and safe, and moves TAT by under 1ns.
func (r rate) tat(s *State) (a, b int64) {
	a, b = s.A, s.B
	if b < 0 {
		b = 0
	} else if uint64(b) >= r.limit {
		b = int64(r.limit) - 1
	}
	return a, b
}

// pending reports whether TAT (a + b/Limit) is after now: the bucket is
// not full.
func pending(a, b, now int64) bool {
	return a > now || a == now && b > 0
}

// used is ceil((TAT-now)·Limit/Window) for TAT > now, the capacity in use,
// saturating at math.MaxInt64 (possible only after the Limit changed).
func (r rate) used(a, b, now int64) int64 {
	// (TAT-now)·Limit = (a-now)·Limit + b, exactly, in 128 bits.
	hi, lo := bits.Mul64(uint64(a-now), r.limit)
	lo, carry := bits.Add64(lo, uint64(b), 0)
	hi += carry
	if hi >= r.window {
		return math.MaxInt64
	}
	q, rem := bits.Div64(hi, lo, r.window)
	if q >= math.MaxInt64 {
		return math.MaxInt64
	}
	if rem > 0 {
		q++
	}
	return int64(q)
}

// bucketCheck answers a request against a token bucket or GCRA.
func bucketCheck(l *Limit, s *State, now, cost int64) Decision {
	r := bucketRate(l)
	capacity := int64(r.capacity)
	if !pending(s.A, s.B, now) {
		*s = State{} // full again: exactly a fresh bucket
		return decide(capacity, 0, cost, now, now)
	}
	a, b := r.tat(s)
	if !pending(a, b, now) {
		// Full as read with this limit, not as written: the fraction was
		// counted over another limit (a stretched one). Read with that
		// limit again the bucket is not full yet, so keep it.
		return decide(capacity, 0, cost, now, now)
	}
	reset := a
	if b > 0 {
		reset = satAdd(a, 1) // the first whole nanosecond at or after TAT
	}
	d := decide(capacity, r.used(a, b, now), cost, now, reset)
	if !d.Allowed && fits(capacity, cost) {
		// c tokens are there once TAT-t <= (C-c)·Window/Limit, that is from
		// t = TAT - (C-c)·Window/Limit = (a-q) + (b-rem)/Limit on.
		q, rem, ok := mulDiv(uint64(capacity-max(cost, 1)), r.window, r.limit)
		if ok && q < math.MaxInt64 {
			at := a - int64(q)
			if uint64(b) > rem {
				at++ // round the fraction up to a whole nanosecond
			}
			d.RetryAfter = max(at-now, 1)
		}
	}
	return d
}

// bucketRecord takes cost tokens at now.
func bucketRecord(l *Limit, s *State, now, cost int64) {
	r := bucketRate(l)
	a, b := r.tat(s)
	if !pending(a, b, now) {
		a, b = now, 0
	}
	a0, b0 := a, b
	// A debt beyond 2C is capped anyway, so cap the cost first: that keeps
	// c·Window/Limit inside 64 bits (at most 2·MaxRefill).
	c := min(uint64(cost), 2*r.capacity)
	q, rem, _ := mulDiv(c, r.window, r.limit)
	a, b = satAdd(a, int64(q)), b+int64(rem)
	if b >= int64(r.limit) {
		a, b = satAdd(a, 1), b-int64(r.limit)
	}
	// Never more than C tokens in debt: TAT <= now + 2C·Window/Limit.
	mq, mrem, _ := mulDiv(2*r.capacity, r.window, r.limit)
	if ma := satAdd(now, int64(mq)); a > ma || a == ma && b > int64(mrem) {
		a, b = ma, int64(mrem)
	}
	// But taking tokens never gives any back: a debt run up at another
	// rate (an elastic stretch, rounded) or a record stamped before the
	// last one may already be past that cap; it stays.
	if a0 > a || a0 == a && b0 > b {
		a, b = a0, b0
	}
	s.A, s.B = a, b
}

// bucketExpiry is when the bucket is full again: the first whole
// nanosecond at or after TAT.
func bucketExpiry(l *Limit, s *State) int64 {
	a, b := bucketRate(l).tat(s)
	if b > 0 {
		return satAdd(a, 1)
	}
	return max(a, 0)
}
