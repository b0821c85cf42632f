// Package wallclocktest is a node's clock for tests that step it, as an
// NTP step or date(1) does: its wall time moves from an instant on, the
// monotonic clock does not, and a reading taken before a step keeps the
// time it had. It drives wallclock.NewGuardOf.
package wallclocktest
