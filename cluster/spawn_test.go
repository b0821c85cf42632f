package cluster

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A pass that finds its key's step still running starts no second one,
// but asks for a new pass the moment the running step ends (it came for a
// change that step may not have seen); a pass that found nothing running
// asks for none.
func TestSpawnOnBusyKeyPassesAgainWhenItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &Node{stop: make(chan struct{}), recon: reconcileState{kick: make(chan struct{}, 1), busy: map[int]bool{}}}
		release := make(chan struct{})
		runs := 0
		step := func(context.Context) { runs++; <-release }
		n.spawn(3, step)
		synctest.Wait()
		n.spawn(3, step) // busy: not run, remembered
		synctest.Wait()
		select {
		case <-n.recon.kick:
			t.Fatal("a pass was asked for while the step still ran")
		default:
		}
		close(release)
		synctest.Wait()
		if runs != 1 {
			t.Fatalf("%d runs, want 1", runs)
		}
		select {
		case <-n.recon.kick:
		default:
			t.Fatal("no new pass asked for when the busy step ended")
		}
		// Alone, a step that ends asks for nothing.
		n.spawn(4, func(context.Context) { time.Sleep(time.Second) })
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case <-n.recon.kick:
			t.Fatal("a step no pass found busy asked for a new pass")
		default:
		}
		n.wg.Wait()
	})
}
