package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/fsm"
)

// closedLoop runs callers that each submit one check, wait for its answer,
// think for think, and go again, for d; it returns every check's latency.
func closedLoop(t *testing.T, rig *batcherRig, callers int, think, d time.Duration) []time.Duration {
	t.Helper()
	p := threePerMinute()
	p.Limits[0].Limit.Limit = 1_000_000
	var mu sync.Mutex
	var lat []time.Duration
	var stop atomic.Bool
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				start := time.Now()
				if _, err := rig.b.submit(context.Background(), []fsm.Check{{Key: fmt.Sprintf("c%d-%d", c, i), Policy: p, Cost: 1}}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(start))
				mu.Unlock()
				time.Sleep(think)
			}
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return lat
}

func median(xs []int) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// Callers that come back after each answer end up in one entry: without
// the linger they split into two cohorts taking turns, each entry half
// full (every entry costs a Raft round trip and a disk flush on each
// replica whatever it carries).
func TestBatcherGathersTheCallersOfTheLastEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 4096, true)
		rig.g.delay = 2 * time.Millisecond
		close(rig.g.gate)
		defer rig.stop(t)
		const callers = 20
		closedLoop(t, rig, callers, time.Millisecond, 2*time.Second)
		sizes := rig.g.entrySizes()
		if m := median(sizes[len(sizes)/2:]); m < callers*7/10 {
			t.Fatalf("entries carry a median of %d checks of %d callers, want most of them", m, callers)
		}
	})
}

// A caller alone, or the first after a quiet spell, never waits for
// others: its check goes out at once.
func TestBatcherLoneCallerNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newBatcherRig(t, 4096, true)
		rig.g.delay = 2 * time.Millisecond
		close(rig.g.gate)
		defer rig.stop(t)
		for _, l := range closedLoop(t, rig, 1, 20*time.Millisecond, 500*time.Millisecond) {
			if l > 2*time.Millisecond {
				t.Fatalf("a lone check took %s, its entry's commit 2ms", l)
			}
		}
		closedLoop(t, rig, 16, time.Millisecond, 300*time.Millisecond) // a busy spell: large entries
		time.Sleep(time.Second)
		for _, l := range closedLoop(t, rig, 1, 20*time.Millisecond, 200*time.Millisecond) {
			if l > 2*time.Millisecond {
				t.Fatalf("after a quiet spell a lone check took %s, its entry's commit 2ms", l)
			}
		}
	})
}
