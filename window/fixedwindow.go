package window

import "math"

// A fixed window counts cost per period and forgets it when the period
// ends. Its State:
//
//	A  the end (exclusive, Unix ns) of the period B counts
//	B  the cost counted in that period, saturating at math.MaxInt64
//	P  nil
//
// Keeping the end rather than the start means Check never needs the
// calendar: a count applies while now < A. The zero State (B == 0) has
// counted nothing.

// fixedCheck answers a request against a fixed window.
func fixedCheck(l *Limit, s *State, now, cost int64) Decision {
	used, reset := int64(0), now
	if s.B > 0 {
		if now < s.A {
			used, reset = s.B, s.A
		} else {
			*s = State{} // the period is over: drop it
		}
	}
	d := decide(l.Limit, used, cost, now, reset)
	if !d.Allowed && fits(l.Limit, cost) {
		// Denied with room for the cost in an empty period, so something is
		// counted: the next period admits it.
		d.RetryAfter = s.A - now
	}
	return d
}

// fixedRecord counts cost at now, starting a new period if the counted one
// has ended.
func fixedRecord(l *Limit, s *State, now, cost int64) {
	if s.B <= 0 || now >= s.A {
		s.A, s.B = fixedEnd(l, now), cost
		return
	}
	s.B = satAdd(s.B, cost)
}

// fixedExpiry is the end of the counted period.
func fixedExpiry(_ *Limit, s *State) int64 {
	if s.B <= 0 {
		return 0
	}
	return s.A
}

// fixedEnd is the end of l's period containing now: the calendar period,
// or the epoch-aligned multiple of Window.
func fixedEnd(l *Limit, now int64) int64 {
	if l.Calendar != CalendarNone {
		return PeriodEnd(l.Calendar, now)
	}
	return satAdd(now-floorMod(now, l.Window, 0), l.Window)
}

// fixedBoundary reports whether end can end a period of l, so a decoded
// State is one fixedRecord could have built.
func fixedBoundary(l *Limit, end int64) bool {
	if end <= 0 {
		return false
	}
	if end == math.MaxInt64 {
		return true // a period ending past the int64 range, saturated
	}
	if l.Calendar != CalendarNone {
		return PeriodStart(l.Calendar, end) == end
	}
	return end%l.Window == 0
}
