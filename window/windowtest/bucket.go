package windowtest

import (
	"math/big"

	"github.com/floodgate/floodgate/window"
)

// bucket: the exact token count, scaled by Window so it is an integer
// (tokens·Window), and the time it was last set. It serves TokenBucket and
// GCRA alike: GCRA is a bucket of Burst (or 1) tokens refilled one per
// Window/Limit.
//
// Read with another limit than it was written with (SetLimit), a bucket
// keeps what a window.State keeps: the time it is full again, TAT, as
// whole nanoseconds a plus a fraction b/Limit with b < Limit counted over
// the limit it was written with. The other limit reads b over itself,
// clamped below it, so TAT moves by less than a nanosecond; the stored
// count only changes at the next Record.
type bucket struct {
	l      window.Limit // read and recorded with
	w      window.Limit // the limit scaled was written with
	scaled *big.Int     // tokens·Window at t0, in w's terms; nil means full
	t0     int64
}

// Capacity is the Limit's window.Limit.Capacity, computed afresh.
func (m *bucket) Capacity() int64 { return capacity(&m.l) }

func capacity(l *window.Limit) int64 {
	if l.Burst > 0 {
		return l.Burst
	}
	if l.Algorithm == window.GCRA {
		return 1
	}
	return l.Limit
}

func (m *bucket) Linear() int64           { return 64 }
func (m *bucket) SetLimit(l window.Limit) { m.l = l }

// full is C·Window, a full bucket scaled, for l.
func full(l *window.Limit) *big.Int {
	return new(big.Int).Mul(big.NewInt(capacity(l)), big.NewInt(l.Window))
}

// view is the state as read with m.l: tokens·Window at t0 (nil when full).
func (m *bucket) view() (*big.Int, int64) {
	if m.scaled == nil || m.w == m.l {
		return m.scaled, m.t0
	}
	// TAT = t0 + missing/Limit_w: a = t0 + missing div Limit_w, and
	// b = missing mod Limit_w, read over Limit_l.
	missing := new(big.Int).Sub(full(&m.w), m.scaled)
	if missing.Sign() <= 0 {
		return nil, 0
	}
	q, r := new(big.Int).QuoRem(missing, big.NewInt(m.w.Limit), new(big.Int))
	a := m.t0 + q.Int64()
	b := min(r.Int64(), m.l.Limit-1)
	// Full at a + b/Limit_l: anchored at a, b·1 short of full.
	return new(big.Int).Sub(full(&m.l), big.NewInt(b)), a
}

// at is the scaled token count at t: min(C·W, tokens·W + (t-t0)·Limit).
func (m *bucket) at(t int64) *big.Int {
	c := full(&m.l)
	scaled, t0 := m.view()
	if scaled == nil {
		return c
	}
	x := new(big.Int).Mul(big.NewInt(t-t0), big.NewInt(m.l.Limit))
	x.Add(x, scaled)
	if x.Cmp(c) > 0 {
		return c
	}
	return x
}

// Used is C - floor(tokens).
func (m *bucket) Used(t int64) int64 {
	fl := new(big.Int).Div(m.at(t), big.NewInt(m.l.Window)) // Euclidean: floor for a positive divisor
	return m.Capacity() - fl.Int64()
}

func (m *bucket) Horizon(now int64) int64 {
	// Full once tokens·W + (t-now)·Limit >= C·W.
	missing := new(big.Int).Sub(full(&m.l), m.at(now))
	return now + new(big.Int).Div(missing, big.NewInt(m.l.Limit)).Int64() + 1
}

// Record takes cost tokens, never going below -C, nor giving any back
// when the bucket is already below (a debt run up at another rate).
func (m *bucket) Record(now, cost int64) {
	held := m.at(now)
	x := new(big.Int).Mul(big.NewInt(cost), big.NewInt(m.l.Window))
	x.Sub(held, x)
	if floor := new(big.Int).Neg(full(&m.l)); x.Cmp(floor) < 0 {
		x = floor
		if held.Cmp(floor) < 0 {
			x = held
		}
	}
	m.scaled, m.t0, m.w = x, now, m.l
}
