package cluster

import (
	"errors"
	"os"
	"sync"
	"testing"
	"testing/synctest"
)

// gatedStore is a syncable whose Sync waits for the test to open its gate
// (one token per flush) and counts the flushes.
type gatedStore struct {
	gate chan struct{}
	err  error

	mu      sync.Mutex
	flushes int
}

func newGatedStore() *gatedStore { return &gatedStore{gate: make(chan struct{})} }

func (s *gatedStore) Sync() error {
	<-s.gate
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushes++
	return s.err
}

func (s *gatedStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushes
}

// syncAll starts n writers of st and returns where their answers arrive.
func syncAll(s *Syncer, st syncable, n int) chan error {
	out := make(chan error, n)
	for range n {
		go func() { out <- s.Sync(st) }()
	}
	return out
}

// Writers that arrive while a flush runs wait for the next one and share
// it: ten writers, two flushes, and nobody answered before their flush.
func TestSyncerWaitersShareOneFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := NewSyncer(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		st := newGatedStore()
		first := syncAll(s, st, 1)
		synctest.Wait() // the first flush has started and waits at the gate
		rest := syncAll(s, st, 9)
		synctest.Wait()
		if len(first) != 0 || len(rest) != 0 {
			t.Fatal("a writer was answered before its flush finished")
		}
		st.gate <- struct{}{}
		synctest.Wait()
		if err := <-first; err != nil {
			t.Fatalf("first writer: %v", err)
		}
		if len(rest) != 0 {
			t.Fatal("writers that came during the first flush were answered by it")
		}
		st.gate <- struct{}{}
		synctest.Wait()
		for range 9 {
			if err := <-rest; err != nil {
				t.Fatalf("writer: %v", err)
			}
		}
		if n := st.count(); n != 2 {
			t.Fatalf("%d flushes for two rounds of writers", n)
		}
	})
}

// A failed flush fails every writer waiting on it.
func TestSyncerErrorReachesEveryWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := NewSyncer(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		st := newGatedStore()
		st.err = errors.New("disk on fire")
		first := syncAll(s, st, 1)
		synctest.Wait()
		rest := syncAll(s, st, 5)
		synctest.Wait()
		close(st.gate) // every flush from now on goes through at once
		synctest.Wait()
		if err := <-first; !errors.Is(err, st.err) {
			t.Fatalf("first writer: %v", err)
		}
		for range 5 {
			if err := <-rest; !errors.Is(err, st.err) {
				t.Fatalf("writer sharing the failed flush: %v", err)
			}
		}
		if n := st.count(); n != 2 {
			t.Fatalf("%d flushes, want 2", n)
		}
	})
}

// Several stores waiting together are flushed with one syncfs on Linux,
// not one by one.
func TestSyncerFlushesSeveralStoresTogether(t *testing.T) {
	if !haveSyncFS {
		t.Skip("no syncfs here: stores are flushed one by one")
	}
	synctest.Test(t, func(t *testing.T) {
		s, err := NewSyncer(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		block := newGatedStore()
		first := syncAll(s, block, 1)
		synctest.Wait()
		a, b := newGatedStore(), newGatedStore()
		close(a.gate)
		close(b.gate)
		ca, cb := syncAll(s, a, 3), syncAll(s, b, 3)
		synctest.Wait()
		block.gate <- struct{}{}
		<-first
		for range 3 {
			if err := errors.Join(<-ca, <-cb); err != nil {
				t.Fatal(err)
			}
		}
		if a.count()+b.count() != 0 {
			t.Fatalf("stores flushed one by one (%d, %d) instead of by one syncfs", a.count(), b.count())
		}
	})
}

// Close answers writers still waiting, and a writer after Close is told
// at once.
func TestSyncerClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := NewSyncer(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		st := newGatedStore()
		first := syncAll(s, st, 1)
		synctest.Wait()
		rest := syncAll(s, st, 4)
		synctest.Wait()
		closed := make(chan error)
		go func() { closed <- s.Close() }()
		synctest.Wait()
		close(st.gate)
		if err := <-closed; err != nil {
			t.Fatalf("close: %v", err)
		}
		if err := <-first; err != nil {
			t.Fatalf("the flush under way when Close came: %v", err)
		}
		for range 4 {
			// Flushed after all, or told the syncer closed: never stuck.
			if err := <-rest; err != nil && !errors.Is(err, os.ErrClosed) {
				t.Fatalf("waiting writer: %v", err)
			}
		}
		if err := s.Sync(st); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("sync after close: %v", err)
		}
	})
}
