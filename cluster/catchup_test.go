package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// a fake meta leader whose answers take 10 ms, each its own number: the
// count of questions asked so far.
type fakeLeader struct {
	mu    sync.Mutex
	asked uint64
}

func (f *fakeLeader) count() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked
}

func (f *fakeLeader) ask(ctx context.Context) (uint64, error) {
	f.mu.Lock()
	f.asked++
	n := f.asked
	f.mu.Unlock()
	select {
	case <-time.After(10 * time.Millisecond):
		return n, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Callers that come while a question is out share the next one: a
// hundred callers, one question out when they come, make two questions in
// all, and none of them is given the answer to the question asked before
// it came.
func TestCatchUpCallersShareOneQuestion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLeader{}
		m := &metaTargets{ask: f.ask}
		first := make(chan uint64, 1)
		go func() {
			got, _ := m.get(context.Background())
			first <- got
		}()
		synctest.Wait() // the first question is out
		var wg sync.WaitGroup
		got := make([]uint64, 100)
		for i := range got {
			wg.Go(func() { got[i], _ = m.get(context.Background()) })
		}
		wg.Wait()
		if a := <-first; a != 1 {
			t.Fatalf("the first caller got answer %d, want 1", a)
		}
		for i, a := range got {
			if a != 2 {
				t.Fatalf("caller %d got answer %d, want 2: the question asked after it came", i, a)
			}
		}
		if n := f.count(); n != 2 {
			t.Fatalf("%d questions for 101 callers, want 2", n)
		}
		// Idle again: the next caller asks at once.
		if a, _ := m.get(context.Background()); a != 3 {
			t.Fatalf("a later caller got answer %d, want 3", a)
		}
	})
}

// A caller whose context ends first gets its error; the question goes on
// for the others.
func TestCatchUpCallerGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLeader{}
		m := &metaTargets{ask: f.ask}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		other := make(chan uint64, 1)
		go func() {
			a, _ := m.get(context.Background())
			other <- a
		}()
		synctest.Wait()
		if _, err := m.get(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the caller's deadline", err)
		}
		if a := <-other; a != 1 {
			t.Fatalf("the other caller got %d, want 1", a)
		}
		// The question the caller that gave up was waiting for is
		// still asked (at most askTimeout), then nothing more.
		time.Sleep(askTimeout)
		if n := f.count(); n != 2 {
			t.Fatalf("%d questions, want 2", n)
		}
	})
}

// An error of the question is every waiting caller's.
func TestCatchUpErrorIsShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &metaTargets{ask: func(context.Context) (uint64, error) {
			time.Sleep(time.Millisecond)
			return 0, ErrNoLeader
		}}
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if _, err := m.get(context.Background()); !errors.Is(err, ErrNoLeader) {
					t.Errorf("got %v, want ErrNoLeader", err)
				}
			})
		}
		wg.Wait()
	})
}
