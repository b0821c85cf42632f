package raftlog

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// holdNextSync makes the next fsync wait until the returned release is
// closed, and returns once it has begun.
func holdNextSync(c *countingOps, begun chan<- chan struct{}) {
	hold := make(chan chan struct{})
	c.hold.Store(&hold)
	go func() {
		release := <-hold
		c.hold.Store(nil)
		begun <- release
	}()
}

// A write whose fsync hangs fails the log once it has hung for
// MaxSyncDuration (caught within a quarter more): Failed closes, Err and
// every later call say the disk stalled, naming the log's directory. The
// hung call itself answers once the disk does.
func TestHungFsyncFailsTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max = 8 * time.Second
		c := &countingOps{}
		dir := t.TempDir()
		s, err := openWith(dir, Options{MaxSyncDuration: max}, c.ops())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		begun := make(chan chan struct{}, 1)
		holdNextSync(c, begun)
		hung := make(chan error, 1)
		go func() { hung <- s.Group("a").StoreLog(entry("a", 1, 1)) }()
		release := <-begun
		start := time.Now()
		select {
		case <-s.Failed():
		case <-time.After(2 * max):
			t.Fatalf("a fsync hung for %s did not fail the log", 2*max)
		}
		if took := time.Since(start); took < max || took > max*5/4 {
			t.Errorf("failed after %s, want within [%s, %s]", took, max, max*5/4)
		}
		if err := s.Err(); !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), dir) {
			t.Errorf("Err = %v, want ErrStalled naming %s", err, dir)
		}
		if err := s.Group("b").StoreLog(entry("b", 1, 1)); !errors.Is(err, ErrStalled) {
			t.Errorf("a store after the stall: %v, want ErrStalled", err)
		}
		close(release)
		if err := <-hung; err != nil {
			t.Errorf("the hung store, once the disk answered: %v", err)
		}
	})
}

// Slow flushes that each return within MaxSyncDuration never fail the
// log, however many follow one another.
func TestSlowFsyncsUnderTheBoundDoNotFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max = 4 * time.Second
		c := &countingOps{}
		s, err := openWith(t.TempDir(), Options{MaxSyncDuration: max}, c.ops())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := uint64(1); i <= 5; i++ {
			begun := make(chan chan struct{}, 1)
			holdNextSync(c, begun)
			done := make(chan error, 1)
			go func() { done <- s.Group("a").StoreLog(entry("a", i, 1)) }()
			release := <-begun
			time.Sleep(max - time.Second) // fake time: the flush takes 3 s
			close(release)
			if err := <-done; err != nil {
				t.Fatalf("store %d: %v", i, err)
			}
		}
		select {
		case <-s.Failed():
			t.Fatalf("failed: %v", s.Err())
		default:
		}
	})
}

// Without MaxSyncDuration nothing watches: a flush may take as long as
// the disk does.
func TestNoStallWatchByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &countingOps{}
		s, err := openWith(t.TempDir(), Options{}, c.ops())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		begun := make(chan chan struct{}, 1)
		holdNextSync(c, begun)
		done := make(chan error, 1)
		go func() { done <- s.Group("a").StoreLog(entry("a", 1, 1)) }()
		release := <-begun
		time.Sleep(time.Hour)
		select {
		case <-s.Failed():
			t.Fatalf("failed: %v", s.Err())
		default:
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
