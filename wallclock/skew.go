//go:build clockskew

package wallclock

import (
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// SkewEnv is the environment variable a test build's skew is read from.
const SkewEnv = "FLOODGATE_TEST_CLOCK_SKEW"

// StepEnv is the environment variable of a test build's step: each
// SIGUSR1 adds it to the skew, as an NTP step or an operator's date moves
// a running node's clock (the monotonic clock does not move).
const StepEnv = "FLOODGATE_TEST_CLOCK_STEP"

var skew atomic.Int64

func init() {
	skew.Store(int64(envDuration(SkewEnv)))
	if step := envDuration(StepEnv); step != 0 {
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		go func() {
			for range usr1 {
				now := skew.Add(int64(step))
				fmt.Fprintf(os.Stderr, "test build: clock stepped by %s, now %s off\n", step, time.Duration(now))
			}
		}()
	}
}

// envDuration reads a Go duration from the environment; a malformed one
// stops the process (a test build only: a typo must not pass for a clock
// in step).
func envDuration(name string) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	return d
}

// Now is the system clock plus the test skew. Add keeps the monotonic
// reading, so durations between two calls are unchanged.
func Now() time.Time { return time.Now().Add(Skew()) }

// From is the node's clock at the instant t, a reading of time.Now. The
// monotonic reading moves with the skew, so a guard (Guard) must measure
// elapsed time on t itself, never on From(t).
func From(t time.Time) time.Time { return t.Add(Skew()) }

// Skew is the test skew added to the system clock.
func Skew() time.Duration { return time.Duration(skew.Load()) }
