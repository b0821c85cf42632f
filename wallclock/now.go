//go:build !clockskew

package wallclock

import "time"

// Now is the system clock.
func Now() time.Time { return time.Now() }

// From is the node's clock at the instant t, a reading of time.Now, so
// that one reading times a duration and stamps a check.
func From(t time.Time) time.Time { return t }

// Skew is how far Now is from the system clock: 0 in a release build.
func Skew() time.Duration { return 0 }
