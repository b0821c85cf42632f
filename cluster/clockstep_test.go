package cluster

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/wallclock"
	"github.com/floodgate/floodgate/wallclock/wallclocktest"
)

// stepRig is a clock watch over peers whose node's clock a test steps
// (NTP, date): the node's stamps come from a guard over that clock, and
// the peers read as far off as the step, the other way. A reading keeps
// the time the clock had at its instant, as the system clock's do.
type stepRig struct {
	mu    sync.Mutex
	clock wallclocktest.Stepped // the node's clock, off the (fake) true time
	peers map[string]time.Duration
	slow  map[string]time.Duration // peers that take this long, then do not answer
	reads chan string              // each reading's peer, as it starts (dropped when full)
	st    *clockState
	stamp *wallclock.Guard
	known atomic.Bool // the node knows its cluster (clockWatch.known)
}

func newStepRig(ctx context.Context, peers ...string) *stepRig {
	return newStepRigAt(ctx, 0, true, peers...)
}

// newStepRigAt is newStepRig of a node whose clock is boot off the true
// time from its start, and which knows its cluster (its members) from
// its start or only once the test sets known.
func newStepRigAt(ctx context.Context, boot time.Duration, known bool, peers ...string) *stepRig {
	r := &stepRig{peers: map[string]time.Duration{}, slow: map[string]time.Duration{}, reads: make(chan string, 16), st: &clockState{failed: make(chan struct{})}}
	r.known.Store(known)
	if boot != 0 {
		r.clock.Set(time.Now(), boot)
	}
	for _, p := range peers {
		r.peers[p] = 0
	}
	r.stamp = wallclock.NewGuardOf(500*time.Millisecond, r.clock.Wall)
	members := func() []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Sorted(maps.Keys(r.peers))
	}
	read := func(ctx context.Context, addr string) (time.Time, error) {
		select {
		case r.reads <- addr:
		default:
		}
		r.mu.Lock()
		slow := r.slow[addr]
		r.mu.Unlock()
		if slow > 0 {
			time.Sleep(slow)
			return time.Time{}, context.DeadlineExceeded
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		// Read with the node's clock as the watch reads it (time.Now in
		// the bubble): a step of the node's clock shows as peers off by
		// its opposite.
		return time.Now().Add(r.peers[addr] - r.clock.Off()), nil
	}
	w := clockWatch{max: 500 * time.Millisecond, members: members, read: read, log: slog.New(slog.DiscardHandler), state: r.st, stamp: r.stamp, known: r.known.Load}
	go w.run(ctx)
	return r
}

// setStep steps the node's clock by d from the true time; peers (by
// name) move theirs to off, from the true time, too.
func (r *stepRig) setStep(d time.Duration, peers map[string]time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock.Set(time.Now(), d)
	for p, off := range peers {
		r.peers[p] = off
	}
}

// stamped is how far the node's stamp is from the true time now.
func (r *stepRig) stamped() time.Duration { return time.Until(r.stamp.Now()) }

// held is the step the node's stamps hold back now (Node.ClockHeld).
func (r *stepRig) held() time.Duration { return r.stamp.Held(time.Now()) }

// A leader's clock that jumps an hour ahead never stamps a check with the
// jump: from the instant of the step to the node's stop (its strikes), its
// stamps go on by the monotonic clock, and the watch reports the step held.
func TestClockStepAheadIsNotStamped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := newStepRig(ctx, "a", "b")
		time.Sleep(clockEvery / 2)
		synctest.Wait()
		if d := r.stamped(); d != 0 {
			t.Fatalf("in step: stamps %v off", d)
		}
		r.setStep(time.Hour, nil)
		for i := 0; ; i++ {
			if d := r.stamped(); d != 0 {
				t.Fatalf("%v after the step: stamps %v off the true time", time.Duration(i)*100*time.Millisecond, d)
			}
			select {
			case <-r.st.failed:
				if r.held() != time.Hour {
					t.Errorf("held %v at the stop, want the hour", r.held())
				}
				return
			case <-time.After(100 * time.Millisecond):
			}
			if i > 200 {
				t.Fatal("the node never stopped")
			}
		}
	})
}

// A step the cluster agrees with (the node's clock was the one off, and
// was put right) is followed at the next reading; one it does not agree
// with, in a tie that stops nobody, is held for as long as the tie lasts;
// and a node alone follows its own clock.
func TestClockStepFollowedOnceAgreed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := newStepRig(ctx, "a")
		time.Sleep(time.Second)
		synctest.Wait()
		// The node's clock steps 2s ahead; its one peer does not follow:
		// a tie, nobody stops, and the stamps hold for a minute.
		r.setStep(2*time.Second, nil)
		for range 60 {
			time.Sleep(time.Second)
			if d := r.stamped(); d != 0 {
				t.Fatalf("in a tie: stamps %v off", d)
			}
		}
		if r.held() != 2*time.Second {
			t.Errorf("held %v, want 2s", r.held())
		}
		select {
		case <-r.st.failed:
			t.Fatal("a tie stopped the node")
		default:
		}
		// The peer's clock moves 2s ahead too (the true time was the
		// node's new one): the next reading agrees, and the stamps follow.
		r.setStep(2*time.Second, map[string]time.Duration{"a": 2 * time.Second})
		time.Sleep(clockEvery + time.Second)
		if d := r.stamped(); d != 2*time.Second {
			t.Fatalf("agreed: stamps %v off, want the clock's 2s", d)
		}
		if r.held() != 0 {
			t.Errorf("held %v after agreement", r.held())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := newStepRig(ctx)
		// Between the watch's rounds (at 0, 1 s, 2 s...): a round at the
		// step's instant could take either time.
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		r.setStep(time.Hour, nil)
		if d := r.stamped(); d != 0 {
			t.Fatalf("alone, at the step: stamps %v off", d)
		}
		time.Sleep(clockEvery + time.Second)
		if d := r.stamped(); d != time.Hour {
			t.Fatalf("alone, a reading later: stamps %v off, want its own clock's hour", d)
		}
	})
}

// A clock an hour ahead, held, is put right while the watch reads its
// peers (a silent one first, which takes its timeout): the peer read after
// the fix finds the clock in step, but the readings spanned the step, so
// the guard anchors nothing, and the stamps stay on the true time. Had it
// anchored at the round's start, when the clock was an hour ahead, every
// stamp would have been an hour ahead until the next round.
func TestClockPutRightDuringReadings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := newStepRig(ctx, "a-down", "b")
		time.Sleep(clockEvery / 2)
		synctest.Wait()
		r.mu.Lock()
		r.slow["a-down"] = clockCallTimeout
		r.mu.Unlock()
		r.setStep(time.Hour, nil) // a tie (b disagrees, a silent): nobody stops
		if d := r.stamped(); d != 0 {
			t.Fatalf("held: stamps %v off", d)
		}
		for addr := range r.reads { // the next round's first reading
			if addr == "a-down" {
				break
			}
		}
		time.Sleep(clockCallTimeout / 2)
		r.setStep(0, nil) // put right while a-down's reading waits
		time.Sleep(clockCallTimeout)
		synctest.Wait()
		for range 10 {
			if d := r.stamped(); d != 0 {
				t.Fatalf("after the fix: stamps %v off the true time", d)
			}
			time.Sleep(time.Second)
		}
		select {
		case <-r.st.failed:
			t.Fatal("the node stopped")
		default:
		}
	})
}

// A node that boots with its clock an hour ahead, before it knows its
// cluster, lists no member to ask: alone, it would agree with itself and
// anchor the hour. Its meta state then arrives (a peer down, one up) as
// its clock is put right: its stamps follow the right clock, where an
// anchor of the hour would have held them an hour ahead, the node never
// an outlier (its clock is right) and never stopping.
func TestClockNotAnchoredBeforeTheClusterIsKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := newStepRigAt(ctx, time.Hour, false)
		time.Sleep(2500 * time.Millisecond) // rounds at 0, 1 s and 2 s, with nobody to ask
		synctest.Wait()
		r.mu.Lock()
		r.peers["a-down"], r.peers["b"] = 0, 0
		r.slow["a-down"] = clockCallTimeout
		r.mu.Unlock()
		r.known.Store(true)
		r.setStep(0, nil) // chrony puts the clock right
		for range 10 {
			if d := r.stamped(); d != 0 {
				t.Fatalf("stamps %v off the true time, the clock right", d)
			}
			time.Sleep(time.Second)
		}
	})
}
