package wallclock

import (
	"sync/atomic"
	"time"
)

// Guard is the clock a node stamps log entries and fast-mode checks with:
// the system clock (From), except that a step of it (an NTP step, an
// operator's date) of more than its bound since the last reading the
// cluster agreed with is not followed until the cluster agrees again
// (Agreed). Until then the stamps go on from that reading by the monotonic
// clock, which no step moves.
//
// Why: a group's log time never goes back. One entry stamped an hour
// ahead would end every window at once (admitting a whole limit again) and
// then hold the group's time there for an hour whatever clock its later
// leaders have: windows stand still, keys never expire, and every answer
// names a wrong reset. The clock watch stops a node whose clock is off, but
// only after several readings; the guard covers the seconds before.
//
// A Guard is safe for concurrent use; a nil Guard is off.
type Guard struct {
	max    time.Duration
	wall   func(time.Time) time.Time // the node's clock at a reading: From, or a test's
	anchor atomic.Pointer[anchor]
}

// anchor is the last reading the cluster agreed with.
type anchor struct {
	at   time.Time // the reading, with its monotonic clock
	wall time.Time // the node's clock at it, without
}

// NewGuard returns a guard that follows steps of up to max (the cluster's
// --max-clock-offset: a step within it is what the clock check allows
// anyway), anchored at the system clock now. A max of 0 turns it off: the
// stamps are the system clock's.
func NewGuard(max time.Duration) *Guard {
	return newGuard(max, From)
}

// NewGuardOf is NewGuard over another clock than the node's: wall gives
// its time at a reading of time.Now (a test's clock, stepped at will).
func NewGuardOf(max time.Duration, wall func(time.Time) time.Time) *Guard {
	return newGuard(max, wall)
}

func newGuard(max time.Duration, wall func(time.Time) time.Time) *Guard {
	g := &Guard{max: max, wall: wall}
	g.Agreed(time.Now())
	return g
}

// Now is the stamp for now.
func (g *Guard) Now() time.Time { return g.From(time.Now()) }

// From is the stamp for the instant t, a reading of time.Now (with its
// monotonic clock), so that one reading times a duration and stamps a
// check. It is the node's clock at t, unless that is more than the bound
// away from the last agreed reading carried forward by the monotonic
// clock; then it is the latter.
func (g *Guard) From(t time.Time) time.Time {
	if g == nil {
		return From(t)
	}
	w := g.wall(t)
	if g.max <= 0 {
		return w
	}
	a := g.anchor.Load()
	held := a.wall.Add(t.Sub(a.at))
	if d := w.Sub(held); d > g.max || d < -g.max {
		return held
	}
	return w
}

// Held is how far the node's clock is from its stamps at the instant t:
// 0 while the stamps follow it, the step otherwise (positive: the clock
// stepped ahead).
func (g *Guard) Held(t time.Time) time.Duration {
	if g == nil {
		return 0
	}
	return g.wall(t).Sub(g.From(t))
}

// Agreed anchors the guard at t, a reading of time.Now at which the node's
// clock was found in step with the cluster's (or there was none to ask):
// from then on the stamps follow the clock again, a step included.
func (g *Guard) Agreed(t time.Time) {
	if g == nil {
		return
	}
	g.anchor.Store(&anchor{at: t, wall: g.wall(t).Round(0)})
}
