// Package wallclock is the clock a node stamps checks with: a group
// leader's time in each log entry, a fast-mode leader's time for the
// checks it answers from memory, and the time a node tells its peers for
// the clock check. Everything else times durations with time.Now.
//
// Stamps come through a Guard, which does not follow a step of the system
// clock until the cluster's clocks agree with the new time (a group's log
// time never goes back, so one entry stamped ahead would hold its windows
// still); the clock check reads the system clock itself (Now).
//
// A release build reads the system clock. A test build (go build -tags
// clockskew) adds FLOODGATE_TEST_CLOCK_SKEW (a Go duration, "2s", "-300ms")
// to it, and each SIGUSR1 adds FLOODGATE_TEST_CLOCK_STEP (a step, which
// the monotonic clock does not see), so that end-to-end tests can run one
// node whose clock is off or jumps:
// processes on one machine share the system clock, and a Go binary reads
// it without libc, so nothing outside the process can skew it.
package wallclock
