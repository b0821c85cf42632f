package wallclocktest

import (
	"sync"
	"time"
)

// Stepped is a clock some duration off the true time (time.Now), stepped
// at instants. The zero value is in step. It is safe for concurrent use.
type Stepped struct {
	mu    sync.Mutex
	steps []step // in order of their instants
}

type step struct {
	from time.Time // a reading of time.Now (monotonic)
	by   time.Duration
}

// Set steps the clock to by off the true time from the instant at on
// (at no earlier than the last step's).
func (c *Stepped) Set(at time.Time, by time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steps = append(c.steps, step{at, by})
}

// Off is how far the clock is off the true time now: the last step's.
func (c *Stepped) Off() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.steps) == 0 {
		return 0
	}
	return c.steps[len(c.steps)-1].by
}

// Wall is the clock's time at the instant t, a reading of time.Now, in
// Unix nanoseconds: with the step in effect then.
func (c *Stepped) Wall(t time.Time) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	by := time.Duration(0)
	for _, s := range c.steps {
		if !t.Before(s.from) {
			by = s.by
		}
	}
	return t.UnixNano() + int64(by)
}
