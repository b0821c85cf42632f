package cluster

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/wallclock"
)

// stepRig is a clock watch over peers whose node's clock a test steps
// (NTP, date): the node's stamps come from a guard over that clock, and
// the peers read as far off as the step, the other way.
type stepRig struct {
	mu    sync.Mutex
	step  time.Duration // the node's clock, from the (fake) true time
	peers map[string]time.Duration
	st    *clockState
	stamp *wallclock.Guard
}

func newStepRig(ctx context.Context, peers ...string) *stepRig {
	r := &stepRig{peers: map[string]time.Duration{}, st: &clockState{failed: make(chan struct{})}}
	for _, p := range peers {
		r.peers[p] = 0
	}
	r.stamp = wallclock.NewGuardOf(500*time.Millisecond, func(t time.Time) time.Time {
		r.mu.Lock()
		defer r.mu.Unlock()
		return t.Add(r.step)
	})
	members := func() []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		var out []string
		for p := range r.peers {
			out = append(out, p)
		}
		return out
	}
	read := func(_ context.Context, addr string) (time.Time, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		// Read with the node's clock as the watch reads it (time.Now in
		// the bubble): a step of the node's clock shows as peers off by
		// its opposite.
		return time.Now().Add(r.peers[addr] - r.step), nil
	}
	w := clockWatch{max: 500 * time.Millisecond, members: members, read: read, log: slog.New(slog.DiscardHandler), state: r.st, stamp: r.stamp}
	go w.run(ctx)
	return r
}

// setStep steps the node's clock by d from the true time; peers (by
// name) move theirs to off, from the true time, too.
func (r *stepRig) setStep(d time.Duration, peers map[string]time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.step = d
	for p, off := range peers {
		r.peers[p] = off
	}
}

// stamped is how far the node's stamp is from the true time now.
func (r *stepRig) stamped() time.Duration { return time.Until(r.stamp.Now()) }

func (r *stepRig) held() time.Duration {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	return r.st.held
}

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
		time.Sleep(time.Second)
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
