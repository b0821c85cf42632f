package cluster

import (
	"sync"
	"testing"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A waiter is woken by the next fire only, not by one before it.
func TestBeaconWakesWaitersOfTheNextFire(t *testing.T) {
	var b beacon
	b.fire() // nobody waits: nothing to wake, nothing kept
	a, c := b.wait(), b.wait()
	if closed(a) || closed(c) {
		t.Fatal("a fire before the wait woke it")
	}
	b.fire()
	if !closed(a) || !closed(c) {
		t.Fatal("a fire did not wake every waiter")
	}
	if next := b.wait(); closed(next) {
		t.Fatal("a wait after the fire was woken by it")
	}
}

// Waits and fires from many goroutines at once (go test -race).
func TestBeaconConcurrent(t *testing.T) {
	var b beacon
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				ch := b.wait()
				b.fire()
				<-ch // fired at least by this goroutine's own fire
			}
		})
	}
	wg.Wait()
}
