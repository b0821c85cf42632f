//go:build clockskew

package wallclock

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
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

// skewStep is the skew from an instant on.
type skewStep struct {
	from time.Time // a reading of time.Now (monotonic)
	skew time.Duration
}

// steps holds every skew the clock has had, oldest first: a reading keeps
// the time the clock had at its instant, as the system clock's do, so a
// step between two readings shows between them.
var steps atomic.Pointer[[]skewStep]

func init() {
	steps.Store(&[]skewStep{{skew: envDuration(SkewEnv)}})
	if step := envDuration(StepEnv); step != 0 {
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		go func() {
			for range usr1 {
				old := *steps.Load()
				now := old[len(old)-1].skew + step
				next := append(slices.Clip(old), skewStep{from: time.Now(), skew: now})
				steps.Store(&next)
				fmt.Fprintf(os.Stderr, "test build: clock stepped by %s, now %s off\n", step, now)
			}
		}()
	}
}

// skewAt is the skew at the instant t.
func skewAt(t time.Time) time.Duration {
	s := *steps.Load()
	for i := len(s) - 1; i > 0; i-- {
		if !t.Before(s[i].from) {
			return s[i].skew
		}
	}
	return s[0].skew
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
func Now() time.Time { return From(time.Now()) }

// From is the node's clock at the instant t, a reading of time.Now: with
// the skew it had then. The monotonic reading moves with the skew, so a
// guard (Guard) must measure elapsed time on t itself, never on From(t).
func From(t time.Time) time.Time { return t.Add(skewAt(t)) }

// Skew is the test skew added to the system clock now.
func Skew() time.Duration {
	s := *steps.Load()
	return s[len(s)-1].skew
}
