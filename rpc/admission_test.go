package rpc

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
)

// take admits a dispatch whole while the checks waiting are under the
// bound, whatever its size; a refusal reserves nothing.
func TestAdmissionTake(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int64
		waiting int64 // taken before
		n       int
		want    bool
	}{
		{"fits", 10, 4, 6, true},
		{"room left, a dispatch larger than it", 10, 9, 1000, true},
		{"a lone dispatch larger than the bound", 10, 0, 1000, true},
		{"full, one more", 10, 10, 1, false},
		{"past the bound, one more", 10, 12, 1, false},
		{"no bound", 0, 1 << 40, 1000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &admission{max: tc.max}
			a.waiting.Store(tc.waiting)
			if got := a.take(tc.n); got != tc.want {
				t.Fatalf("take(%d) with %d of %d waiting = %v, want %v", tc.n, tc.waiting, tc.max, got, tc.want)
			}
			want := tc.waiting
			if tc.want {
				want += int64(tc.n)
			}
			if w := a.waiting.Load(); w != want {
				t.Errorf("%d waiting after take, want %d", w, want)
			}
			if tc.want {
				a.release(tc.n)
				if w := a.waiting.Load(); w != tc.waiting {
					t.Errorf("%d waiting after release, want %d", w, tc.waiting)
				}
			}
		})
	}
}

// Under contention the checks admitted and still held never exceed the
// bound by more than one dispatch, and every reservation given back leaves nothing waiting (run with
// -race). Each taker holds what it took until all are done: 16 takers of
// 100 reservations each would hold thousands of checks without the bound.
func TestAdmissionHoldsUnderContention(t *testing.T) {
	const bound, workers, rounds = 50, 16, 100
	a := &admission{max: bound}
	var held atomic.Int64
	var wg sync.WaitGroup
	taken := make([][]int, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				n := 1 + (w+i)%7
				if a.take(n) {
					held.Add(int64(n))
					taken[w] = append(taken[w], n)
				}
			}
		})
	}
	wg.Wait()
	if h := held.Load(); h >= bound+7 || h == 0 {
		t.Errorf("%d checks admitted and held at once, bound %d and dispatches of up to 7", h, bound)
	}
	for _, ns := range taken {
		for _, n := range ns {
			a.release(n)
		}
	}
	if w := a.waiting.Load(); w != 0 {
		t.Errorf("%d still waiting after every release", w)
	}
}

// A node waiting on its bound refuses the next dispatch at once: every
// check Unavailable, naming the flag, sent nowhere. Once the waiting
// checks are answered, checks are taken again.
func TestDispatchRefusesPastTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted()
		release := make(chan struct{})
		s.answer = func(_ context.Context, _ string, shard int, checks []fsm.Check) ([]policy.Result, error) {
			<-release // a commit that takes its time
			return answered(shard, len(checks)), nil
		}
		d := s.dispatcher()
		d.limit = &admission{max: 3}
		go d.dispatch(context.Background(), checksOf("g0/a", "g1/b"))
		go d.dispatch(context.Background(), checksOf("g2/c"))
		synctest.Wait()
		_, errs := d.dispatch(context.Background(), checksOf("g0/d", "g1/e"))
		for i, err := range errs {
			if !errors.Is(err, ErrOverloaded) || codeOf(err) != codes.Unavailable || !strings.Contains(err.Error(), "--max-checks-waiting allows (3)") {
				t.Errorf("check %d past the bound: %v (%s), want Unavailable naming --max-checks-waiting", i, err, codeOf(err))
			}
		}
		if n := len(s.sentTo()); n != 3 {
			t.Errorf("%d calls, want the 3 of the checks taken: refused checks are sent nowhere", n)
		}
		close(release)
		synctest.Wait()
		if w := d.limit.waiting.Load(); w != 0 {
			t.Fatalf("%d checks still waiting once all were answered", w)
		}
		res, errs := d.dispatch(context.Background(), checksOf("g0/d", "g1/e"))
		for i, err := range errs {
			if err != nil || res[i] != (policy.Result{Allowed: true, Remaining: int64(i)}) {
				t.Errorf("check %d once room was back: %+v, %v", i, res[i], err)
			}
		}
	})
}
