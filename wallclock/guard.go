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
// Until the first agreed reading the stamps are the system clock's: a node
// that starts with its clock off is the clock watch's to stop, and one
// whose clock is put right meanwhile is followed at once. Go's monotonic
// clock stops while the machine is suspended and its wall clock does not,
// so a resume looks like a step ahead: Held asks for a reading at once
// (Wake), and the stamps lag only until it.
//
// A Guard is safe for concurrent use; a nil Guard is off.
type Guard struct {
	max time.Duration
	// wall is the node's clock at a reading of time.Now, in Unix
	// nanoseconds (From's, or a test's): never a time.Time, whose Sub
	// compares monotonic readings and would never see a step.
	wall   func(time.Time) int64
	anchor atomic.Pointer[anchor]
	wake   chan struct{}
}

// anchor is the last reading the cluster agreed with. Wall times are
// kept in Unix nanoseconds: Sub of two time.Time that carry monotonic
// readings compares those, and would never see a step.
type anchor struct {
	at   time.Time // the reading, with its monotonic clock
	wall int64     // the node's clock at it
}

// NewGuard returns a guard that follows steps of up to max (the cluster's
// --max-clock-offset: a step within it is what the clock check allows
// anyway). A max of 0 turns it off: the stamps are the system clock's.
func NewGuard(max time.Duration) *Guard {
	return NewGuardOf(max, func(t time.Time) int64 { return From(t).UnixNano() })
}

// NewGuardOf is NewGuard over another clock than the node's: wall gives
// its time, in Unix nanoseconds, at a reading of time.Now (a test's clock,
// stepped at will).
func NewGuardOf(max time.Duration, wall func(time.Time) int64) *Guard {
	return &Guard{max: max, wall: wall, wake: make(chan struct{}, 1)}
}

// Now is the stamp for now.
func (g *Guard) Now() time.Time { return g.From(time.Now()) }

// From is the stamp for the instant t, a reading of time.Now (with its
// monotonic clock), so that one reading times a duration and stamps a
// check. It is the node's clock at t, unless that is more than the bound
// away from the last agreed reading carried forward by the monotonic
// clock; then it is the latter, and the clock watch is woken (Wake).
func (g *Guard) From(t time.Time) time.Time {
	if g == nil {
		return From(t)
	}
	w, stamp := g.stamp(t)
	if stamp != w {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	return time.Unix(0, stamp)
}

// stamp is the node's clock and the stamp at t, in Unix nanoseconds.
func (g *Guard) stamp(t time.Time) (wall, stamp int64) {
	w := g.wall(t)
	a := g.anchor.Load()
	if g.max <= 0 || a == nil {
		return w, w
	}
	held := a.wall + int64(t.Sub(a.at)) // by the monotonic clock
	if d := time.Duration(w - held); d > g.max || d < -g.max {
		return w, held
	}
	return w, w
}

// Held is how far the node's clock is from its stamps at the instant t:
// 0 while the stamps follow it, the step otherwise (positive: the clock
// stepped ahead). Unlike From it never wakes the clock watch, which asks.
func (g *Guard) Held(t time.Time) time.Duration {
	if g == nil {
		return 0
	}
	w, stamp := g.stamp(t)
	return time.Duration(w - stamp)
}

// Wake is signalled when a stamp was held back: the clock watch reads the
// cluster's clocks then rather than at its next round. Nil for a nil Guard.
func (g *Guard) Wake() <-chan struct{} {
	if g == nil {
		return nil
	}
	return g.wake
}

// steadyWithin is how far the node's clock may move apart from the
// monotonic clock over a reading and still be taken as unstepped: NTP
// slews both alike, so anything past it is a step or a suspend.
const steadyWithin = 10 * time.Millisecond

// Agreed anchors the guard at end, given that the node's clock, read
// between start and end (readings of time.Now), was found in step with the
// cluster's (or there was none to ask): from then on the stamps follow the
// clock again, a step included. If the clock stepped between start and end
// (its time moved apart from the monotonic clock's), the readings may have
// judged either time, so nothing is anchored: the next round judges again.
// It reports whether it anchored.
func (g *Guard) Agreed(start, end time.Time) bool {
	if g == nil {
		return false
	}
	ws, we := g.wall(start), g.wall(end)
	if d := time.Duration(we-ws) - end.Sub(start); d > steadyWithin || d < -steadyWithin {
		return false
	}
	g.anchor.Store(&anchor{at: end, wall: we})
	return true
}
