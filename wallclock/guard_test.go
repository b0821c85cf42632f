package wallclock

import (
	"sync"
	"testing"
	"time"
)

// steppedClock is a node's clock that a test steps, as NTP or date(1) do:
// its wall time moves, the monotonic clock does not.
type steppedClock struct {
	mu   sync.Mutex
	step time.Duration
}

func (c *steppedClock) set(d time.Duration) { c.mu.Lock(); c.step = d; c.mu.Unlock() }

func (c *steppedClock) wall(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return t.Add(c.step)
}

// The stamps follow the node's clock until it steps beyond the bound, and
// then go on by the monotonic clock from the last agreed reading, whichever
// way it stepped, until the cluster agrees with the new time.
func TestGuardHoldsAStepUntilAgreed(t *testing.T) {
	const max = 500 * time.Millisecond
	clock := &steppedClock{}
	base := time.Now()
	g := newGuard(max, clock.wall)
	g.Agreed(base)
	at := func(d time.Duration) time.Time { return base.Add(d) } // a reading d after base (monotonic)
	for _, tc := range []struct {
		name    string
		step    time.Duration // the clock's step at this point
		elapsed time.Duration // since base
		want    time.Duration // the stamp, after base
		held    time.Duration
	}{
		{"in step", 0, time.Second, time.Second, 0},
		{"a step within the bound is followed", 400 * time.Millisecond, 2 * time.Second, 2*time.Second + 400*time.Millisecond, 0},
		{"an hour ahead is held", time.Hour, 3 * time.Second, 3 * time.Second, time.Hour},
		{"and stays held as time passes", time.Hour, 10 * time.Second, 10 * time.Second, time.Hour},
		{"an hour behind is held too", -time.Hour, 11 * time.Second, 11 * time.Second, -time.Hour},
		{"just past the bound is held", max + time.Millisecond, 12 * time.Second, 12 * time.Second, max + time.Millisecond},
		{"back in step", 0, 13 * time.Second, 13 * time.Second, 0},
	} {
		clock.set(tc.step)
		if got := g.From(at(tc.elapsed)).Sub(base); got != tc.want {
			t.Errorf("%s: stamp base+%v, want base+%v", tc.name, got, tc.want)
		}
		if got := g.Held(at(tc.elapsed)); got != tc.held {
			t.Errorf("%s: held %v, want %v", tc.name, got, tc.held)
		}
	}

	// The cluster agrees with the stepped clock (it was the one off
	// before): the stamps follow it from then on.
	clock.set(time.Hour)
	g.Agreed(at(20 * time.Second))
	if got := g.From(at(21 * time.Second)).Sub(base); got != time.Hour+21*time.Second {
		t.Errorf("after agreement: stamp base+%v, want base+1h0m21s", got)
	}
	if got := g.Held(at(21 * time.Second)); got != 0 {
		t.Errorf("after agreement: held %v", got)
	}
}

// Off (a bound of 0, the clock check off): the stamps are the clock's,
// step or not.
func TestGuardOff(t *testing.T) {
	clock := &steppedClock{}
	g := newGuard(0, clock.wall)
	now := time.Now()
	clock.set(time.Hour)
	if got := g.From(now).Sub(now); got != time.Hour {
		t.Errorf("stamp %v from the reading, want the clock's hour", got)
	}
	if g.Held(now) != 0 {
		t.Errorf("held %v", g.Held(now))
	}
}

// A stamp is read on every check while the clock watch re-anchors the
// guard: run with -race.
func TestGuardConcurrent(t *testing.T) {
	g := NewGuard(time.Second)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				if d := time.Until(g.Now()); d > time.Second || d < -time.Second {
					t.Errorf("stamp %v from now", d)
					return
				}
			}
		})
	}
	for range 1000 {
		g.Agreed(time.Now())
	}
	wg.Wait()
}
