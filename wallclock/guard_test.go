package wallclock

import (
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/wallclock/wallclocktest"
)

// The stamps follow the node's clock until it steps beyond the bound, and
// then go on by the monotonic clock from the last agreed reading, whichever
// way it stepped, until the cluster agrees with the new time.
func TestGuardHoldsAStepUntilAgreed(t *testing.T) {
	const max = 500 * time.Millisecond
	clock := &wallclocktest.Stepped{}
	base := time.Now()
	at := func(d time.Duration) time.Time { return base.Add(d) } // a reading d after base (monotonic)
	g := NewGuardOf(max, clock.Wall)
	if !g.Agreed(base, at(10*time.Millisecond)) {
		t.Fatal("an unstepped reading not anchored")
	}
	for _, tc := range []struct {
		name    string
		step    time.Duration // the clock's step from this point
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
		clock.Set(at(tc.elapsed-time.Millisecond), tc.step)
		if got := g.From(at(tc.elapsed)).Sub(base); got != tc.want {
			t.Errorf("%s: stamp base+%v, want base+%v", tc.name, got, tc.want)
		}
		if got := g.Held(at(tc.elapsed)); got != tc.held {
			t.Errorf("%s: held %v, want %v", tc.name, got, tc.held)
		}
	}

	// The cluster agrees with the stepped clock (it was the one off
	// before): the stamps follow it from then on.
	clock.Set(at(19*time.Second), time.Hour)
	if !g.Agreed(at(20*time.Second), at(20*time.Second+50*time.Millisecond)) {
		t.Fatal("agreement not anchored")
	}
	if got := g.From(at(21 * time.Second)).Sub(base); got != time.Hour+21*time.Second {
		t.Errorf("after agreement: stamp base+%v, want base+1h0m21s", got)
	}
	if got := g.Held(at(21 * time.Second)); got != 0 {
		t.Errorf("after agreement: held %v", got)
	}
}

// Readings that spanned a step judged either time: nothing is anchored.
// The clock an hour ahead is put right while the peers are read, and they
// find it in step: anchored at the start of the readings, the stamps would
// be an hour ahead from then on.
func TestGuardNotAnchoredAcrossAStep(t *testing.T) {
	clock := &wallclocktest.Stepped{}
	base := time.Now()
	at := func(d time.Duration) time.Time { return base.Add(d) }
	g := NewGuardOf(500*time.Millisecond, clock.Wall)
	g.Agreed(base, base)
	clock.Set(at(time.Second), time.Hour) // held from here
	clock.Set(at(2500*time.Millisecond), 0)
	if g.Agreed(at(2*time.Second), at(3*time.Second)) {
		t.Fatal("anchored across a step")
	}
	if d := g.From(at(4 * time.Second)).Sub(at(4 * time.Second)); d != 0 {
		t.Fatalf("stamps %v off the true time", d)
	}
	// A suspend: the wall clock ran on 10 minutes while the monotonic
	// clock stood; readings across it are not anchored either.
	clock.Set(at(5*time.Second), 10*time.Minute)
	if g.Agreed(at(4*time.Second), at(6*time.Second)) {
		t.Fatal("anchored across a suspend")
	}
}

// Before its first agreed reading a guard follows the clock, whatever it
// does: a node started with its clock off is the clock watch's to stop,
// and one put right meanwhile is followed at once. A held stamp wakes the
// watch, without blocking.
func TestGuardFollowsUntilFirstAgreedAndWakesWhenHolding(t *testing.T) {
	clock := &wallclocktest.Stepped{}
	base := time.Now()
	g := NewGuardOf(500*time.Millisecond, clock.Wall)
	clock.Set(base, time.Hour)
	if d := g.From(base.Add(time.Second)).Sub(base.Add(time.Second)); d != time.Hour {
		t.Fatalf("unanchored: stamps %v off, want the clock's hour", d)
	}
	clock.Set(base.Add(2*time.Second), 0)
	if d := g.From(base.Add(3 * time.Second)).Sub(base.Add(3 * time.Second)); d != 0 {
		t.Fatalf("unanchored, clock put right: stamps %v off", d)
	}
	select {
	case <-g.Wake():
		t.Fatal("woken while following")
	default:
	}
	g.Agreed(base.Add(3*time.Second), base.Add(3*time.Second))
	clock.Set(base.Add(4*time.Second), time.Hour)
	for range 3 {
		g.From(base.Add(5 * time.Second)) // held: wakes, never blocks
	}
	select {
	case <-g.Wake():
	default:
		t.Fatal("a held stamp did not wake the watch")
	}
}

// Off (a bound of 0, the clock check off), or nil: the stamps are the
// clock's, step or not.
func TestGuardOff(t *testing.T) {
	clock := &wallclocktest.Stepped{}
	g := NewGuardOf(0, clock.Wall)
	now := time.Now()
	g.Agreed(now, now)
	clock.Set(now, time.Hour)
	if got := g.From(now.Add(time.Second)).Sub(now.Add(time.Second)); got != time.Hour {
		t.Errorf("stamp %v from the reading, want the clock's hour", got)
	}
	if g.Held(now) != 0 {
		t.Errorf("held %v", g.Held(now))
	}
	var none *Guard
	if d := time.Until(none.Now()); d > time.Second || d < -time.Second || none.Held(now) != 0 || none.Wake() != nil || none.Agreed(now, now) {
		t.Error("a nil guard is not off")
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
				if d := time.Until(g.Now()); d > time.Second+Skew() || d < -time.Second+Skew() {
					t.Errorf("stamp %v from now", d)
					return
				}
			}
		})
	}
	for range 1000 {
		now := time.Now()
		g.Agreed(now, now)
	}
	wg.Wait()
}
