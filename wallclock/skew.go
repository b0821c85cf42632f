//go:build clockskew

package wallclock

import (
	"fmt"
	"os"
	"time"
)

// SkewEnv is the environment variable a test build's skew is read from.
const SkewEnv = "FLOODGATE_TEST_CLOCK_SKEW"

var skew = func() time.Duration {
	v := os.Getenv(SkewEnv)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		// A test build only: a typo must not pass for a clock in step.
		fmt.Fprintf(os.Stderr, "%s: %v\n", SkewEnv, err)
		os.Exit(2)
	}
	return d
}()

// Now is the system clock plus the test skew. Add keeps the monotonic
// reading, so durations between two calls are unchanged.
func Now() time.Time { return time.Now().Add(skew) }

// From is the node's clock at the instant t, a reading of time.Now.
func From(t time.Time) time.Time { return t.Add(skew) }

// Skew is the test skew added to the system clock.
func Skew() time.Duration { return skew }
