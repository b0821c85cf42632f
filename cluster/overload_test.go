package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// Checks whose callers gave up while they waited behind a slow entry are
// never written: past its capacity a leader wrote that backlog, counting
// checks nobody was told of (the callers' limits spent) while the callers
// still there timed out behind it.
func TestBatcherDropsChecksWhoseCallersGaveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 4096, true)
		defer rig.stop(t)
		p := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 1000, Window: int64(time.Hour)}}}}
		first := rig.submit(t.Context(), p, "k", 1) // in flight, its apply held at the gate
		var gone []chan submitted
		for range 200 {
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			gone = append(gone, rig.submit(ctx, p, "k", 1))
		}
		time.Sleep(time.Second) // they give up
		for _, ch := range gone {
			if s := <-ch; !errors.Is(s.err, ErrUnavailable) && !errors.Is(s.err, ErrNoLeader) {
				t.Fatalf("a caller that gave up: %v", s.err)
			}
		}
		live := rig.submit(t.Context(), p, "k", 1) // still waiting when the gate opens
		close(rig.g.gate)
		if s := <-first; s.err != nil {
			t.Fatal(s.err)
		}
		s := <-live
		if s.err != nil || s.res[0].Remaining != 998 {
			t.Fatalf("the caller still there: %+v %v; want allowed with 998 left (the first check, then its own)", s.res, s.err)
		}
		if sizes := rig.g.entrySizes(); fmt.Sprint(sizes) != "[1 1]" {
			t.Fatalf("entries written: %v, want [1 1]: the given-up callers' checks were written", sizes)
		}
	})
}

// What Vet reserved for checks whose caller gave up once they were written
// is held until they are applied: let go at once, a later call was vetted
// against states that did not count them, and the group went past
// --max-key-states when the slow entry and the later one applied.
func TestReservationOfAGivenUpCallHeldUntilDecided(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 4096, true)
		defer rig.stop(t)
		lane := newFastLane(rig.r, rig.g.shard, testFastConfig(), nil, func() error { return rig.nl })
		defer lane.close()
		const bound = 50
		most := fsm.Room{States: bound}
		p := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 10, Window: int64(time.Hour)}}}}
		sh := rig.g.shard
		keys := func(prefix string) []fsm.Check {
			checks := make([]fsm.Check, bound)
			for i := range checks {
				checks[i] = fsm.Check{Key: fmt.Sprint(prefix, i), Policy: p, Cost: 1}
			}
			return checks
		}
		// As Node.Submit does: vet, submit, release.
		call := func(ctx context.Context, checks []fsm.Check) error {
			v, adds := sh.Vet(checks, most, &fsm.Call{})
			if v != fsm.Take {
				return errVetRefused
			}
			var late lateDecisions
			defer late.release(sh, adds)
			_, err := submitStrict(ctx, lane, rig.b, checks, &late)
			return err
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if err := call(ctx, keys("a")); !errors.Is(err, ErrUnavailable) { // written, held at the gate
			t.Fatalf("a call whose entry stalled: %v, want ErrUnavailable (outcome unknown)", err)
		}
		later, cancelLater := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancelLater()
		if err := call(later, keys("b")); !errors.Is(err, errVetRefused) {
			t.Fatalf("a second call of %d new keys while the first is in flight: %v, want it refused by vet (the bound is %d)", bound, err, bound)
		}
		close(rig.g.gate)
		synctest.Wait()
		if got := sh.Stats().States; got != bound {
			t.Fatalf("the group holds %d states, want the first call's %d", got, bound)
		}
		if err := call(t.Context(), keys("a")); err != nil {
			t.Fatalf("the first call's keys again, once applied: %v", err)
		}
	})
}

var errVetRefused = errors.New("refused by vet")

// A steady overload, twice what the leader writes, each caller waiting
// 2 s: once the queue is seconds long, its oldest requests have no time
// left for a commit. They are refused unwritten (ErrBacklog) rather than
// written for callers gone by the commit, so the callers still there go on being
// answered and little is counted for nobody. (Dropping only the callers
// already gone, from the third second on every caller was told "outcome
// unknown" while all of it was counted.)
func TestBatcherOverloadAnswersTheCallersStillThere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true)   // 10 checks an entry
		rig.g.delay = 20 * time.Millisecond // each takes 20 ms: 500 checks a second
		close(rig.g.gate)
		p := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 1_000_000_000, Window: int64(time.Hour)}}}}
		type outcome struct {
			at  time.Duration
			err error
		}
		const offered = 10 * time.Second
		out := make(chan outcome, 20_000)
		start := time.Now()
		n := 0
		for time.Since(start) < offered { // 1,000 a second
			n++
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				at := time.Since(start)
				_, err := rig.b.submit(ctx, []fsm.Check{{Key: "k", Policy: p, Cost: 1}})
				out <- outcome{at, err}
			}()
			time.Sleep(time.Millisecond)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		answered, unknown, notWritten := 0, 0, 0
		for range n {
			o := <-out
			if o.at < 3*time.Second { // the queue is seconds long from here on
				continue
			}
			switch {
			case o.err == nil:
				answered++
			case errors.Is(o.err, ErrUnavailable):
				unknown++ // written, its caller gone by the commit
			case errors.Is(o.err, ErrBacklog), errors.Is(o.err, ErrNoLeader):
				notWritten++ // refused behind the backlog, or its caller gone
			default:
				t.Fatalf("a check failed otherwise: %v", o.err)
			}
		}
		written := 0
		for _, s := range rig.g.entrySizes() {
			written += s
		}
		t.Logf("offered %d in %v, %d written; from the third second: %d answered, %d unknown, %d not written",
			n, offered, written, answered, unknown, notWritten)
		// The leader writes about 500 a second, 7 s of them after the
		// third second: most must reach a caller still there.
		if answered < 2500 || unknown > answered/10 {
			t.Errorf("from the third second %d answered and %d written for callers gone: want most of the leader's 3,500 answered", answered, unknown)
		}
		rig.stop(t)
	})
}

// Without a backlog every check is written, however long the last commit
// took: one slow commit (a disk hiccup) refused no check after it. (A
// deadline drop judged by the last commit alone refused every later check
// with less time left than it took, for good: nothing was sent, so the
// estimate never changed.)
func TestBatcherWritesEveryCheckAfterASlowCommit(t *testing.T) {
	for _, tc := range []struct {
		name           string
		slow, deadline time.Duration
	}{
		{"a 3 s commit, callers of --leader-wait", 3 * time.Second, 2 * time.Second},
		{"a 30 ms commit, Envoy's 20 ms timeout", 30 * time.Millisecond, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rig := newBatcherRig(t, 10, true)
				defer rig.stop(t)
				rig.g.delay = tc.slow
				close(rig.g.gate)
				p := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 1_000_000, Window: int64(time.Hour)}}}}
				if _, err := rig.b.submit(context.Background(), []fsm.Check{{Key: "k", Policy: p, Cost: 1}}); err != nil {
					t.Fatal(err)
				}
				rig.g.delay = time.Millisecond // the disk is fast again
				for i := range 100 {
					ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
					_, err := rig.b.submit(ctx, []fsm.Check{{Key: "k", Policy: p, Cost: 1}})
					cancel()
					if err != nil {
						t.Fatalf("check %d after the slow commit: %v", i, err)
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		})
	}
}

// dropGone refuses for its deadline only a request behind a backlog, and
// never every one of them: the one with the most time left goes (see
// dropGone); one whose caller is gone is dropped always.
func TestDropGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const took = 20 * time.Millisecond
		req := func(left time.Duration, checks int) *request {
			ctx, cancel := context.WithTimeout(context.Background(), left)
			t.Cleanup(cancel)
			return &request{ctx: ctx, checks: make([]fsm.Check, checks), done: make(chan struct{})}
		}
		gone := func() *request {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return &request{ctx: ctx, checks: make([]fsm.Check, 1), done: make(chan struct{})}
		}
		for _, tc := range []struct {
			name  string
			queue []*request
			kept  []int // indices of queue kept
		}{
			{"one entry's worth, some late", []*request{req(time.Millisecond, 5), req(time.Second, 5)}, []int{0, 1}},
			{"a backlog, some late", []*request{req(time.Millisecond, 6), req(time.Second, 5)}, []int{1}},
			{"a backlog, all late: the one with the most time left", []*request{req(10*time.Millisecond, 6), req(time.Millisecond, 5)}, []int{0}},
			{"callers gone", []*request{gone(), req(time.Second, 1), gone()}, []int{1}},
		} {
			queue := slices.Clone(tc.queue)
			kept := dropGone("shard-0", queue, time.Now(), took, 10)
			var got []int
			for _, k := range kept {
				got = append(got, slices.Index(tc.queue, k))
			}
			if !slices.Equal(got, tc.kept) {
				t.Errorf("%s: kept %v, want %v", tc.name, got, tc.kept)
			}
			for i, r := range tc.queue {
				select {
				case <-r.done:
					if slices.Contains(tc.kept, i) {
						t.Errorf("%s: request %d kept and answered", tc.name, i)
					} else if r.ctx.Err() == nil && !errors.Is(r.err, ErrBacklog) {
						t.Errorf("%s: request %d refused with %v, want ErrBacklog", tc.name, i, r.err)
					}
				default:
					if !slices.Contains(tc.kept, i) {
						t.Errorf("%s: request %d dropped unanswered", tc.name, i)
					}
				}
			}
		}
	})
}

// Callers that gave up while a slow commit ran are no backlog: the live
// checks after them, which fit one entry, are all written (counted dead,
// they made a backlog of a queue of three, and two checks with time left
// for the fast disk were refused on the slow commit's estimate).
func TestBatcherBacklogCountsLiveChecksOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true)
		defer rig.stop(t)
		close(rig.g.gate)
		p := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 1_000_000, Window: int64(time.Hour)}}}}
		for _, d := range []time.Duration{100 * time.Millisecond, 100 * time.Millisecond} { // two slow commits: the estimate is 100 ms
			rig.g.delay = d
			if s := <-rig.submit(context.Background(), p, "k", 1); s.err != nil {
				t.Fatal(s.err)
			}
		}
		first := rig.submit(context.Background(), p, "k", 1) // a third, in flight
		rig.g.delay = time.Millisecond                       // the disk fast again for the next entries
		for range 12 {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			rig.submit(ctx, p, "k", 1) // gone by the commit
		}
		time.Sleep(60 * time.Millisecond)
		var live []chan submitted
		for range 2 {
			ctx, cancel := context.WithTimeout(context.Background(), 80*time.Millisecond) // 40 ms left at the commit
			defer cancel()
			live = append(live, rig.submit(ctx, p, "k", 1))
		}
		if s := <-first; s.err != nil {
			t.Fatal(s.err)
		}
		for i, ch := range live {
			if s := <-ch; s.err != nil {
				t.Errorf("live check %d of 2, no backlog: %v", i, s.err)
			}
		}
	})
}

// One disk stall under a light load: the callers that waited through it,
// a backlog when it ends, are written, the disk fast again (judged by the
// stalled commit alone, 200 of 280 were refused).
func TestBatcherOneStallRefusesNoneBehindIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true)
		defer rig.stop(t)
		close(rig.g.gate)
		p := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 1_000_000_000, Window: int64(time.Hour)}}}}
		rig.g.delay = time.Millisecond
		for range 3 {
			if s := <-rig.submit(context.Background(), p, "k", 1); s.err != nil {
				t.Fatal(s.err)
			}
		}
		rig.g.delay = 1500 * time.Millisecond
		stalled := rig.submit(context.Background(), p, "k", 1)
		time.Sleep(time.Millisecond)
		rig.g.delay = time.Millisecond
		var behind []chan submitted
		for start := time.Now(); time.Since(start) < 1400*time.Millisecond; time.Sleep(5 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			behind = append(behind, rig.submit(ctx, p, "k", 1))
		}
		if s := <-stalled; s.err != nil {
			t.Fatal(s.err)
		}
		for i, ch := range behind {
			if s := <-ch; s.err != nil {
				t.Fatalf("check %d of the %d behind the stall: %v", i, len(behind), s.err)
			}
		}
	})
}

// Every caller's deadline shorter than a commit (Envoy's 15 ms against
// entries of 20 ms), behind a backlog: one check an entry, the one with
// the most time left, goes to tell how long a commit takes; the others are
// refused unwritten. Kept all, each entry was written for callers gone by
// its commit, every caller told "outcome unknown", all of it counted.
func TestBatcherAllLateWritesOneAnEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 10, true)
		rig.g.delay = 20 * time.Millisecond
		close(rig.g.gate)
		p := &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 1_000_000_000, Window: int64(time.Hour)}}}}
		out := make(chan error, 5000)
		n := 0
		for start := time.Now(); time.Since(start) < 3*time.Second; time.Sleep(time.Millisecond) {
			n++
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Millisecond)
				defer cancel()
				_, err := rig.b.submit(ctx, []fsm.Check{{Key: "k", Policy: p, Cost: 1}})
				out <- err
			}()
		}
		time.Sleep(time.Second)
		synctest.Wait()
		backlog := 0
		for range n {
			if err := <-out; errors.Is(err, ErrBacklog) {
				backlog++
			}
		}
		written := 0
		for _, s := range rig.g.entrySizes() {
			written += s
		}
		t.Logf("%d callers: %d checks written (for callers gone by the commit), %d refused unwritten", n, written, backlog)
		if written > n/10 || backlog < n/2 {
			t.Errorf("of %d callers, %d checks written for nobody and %d refused unwritten: want most refused", n, written, backlog)
		}
		rig.stop(t)
	})
}
