package cluster

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

// Route holds checks back from a leader its replica has not heard from
// for grid.silent (Group.silentLeader). On a paced group the followers
// hear their leader at every instant of the grid, so neither ever finds
// it silent; once the leader is cut off, both do within the suspicion and
// before they elect another, and a leader never finds itself silent.
func TestFollowersFindACutLeaderSilentBeforeTheyReplaceIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, ps := pacedGroup(t)
		defer closePaced(g, ps)
		silence := newGrid(testEvery).silent()
		silent := func(i int) bool { return (&Group{raft: g.rafts[i]}).silentLeader(silence) }
		old := g.leader()
		for range 1000 { // a second of fake time, at every millisecond
			for i := range g.rafts {
				if silent(i) {
					t.Fatalf("replica %d (%s) found its live leader silent", i, g.rafts[i].State())
				}
			}
			time.Sleep(time.Millisecond)
		}
		g.cut(old)
		start := time.Now()
		found := map[int]time.Duration{}
		for len(found) < len(g.rafts)-1 {
			for n, r := range g.rafts {
				if n != old && r.State() == raft.Leader {
					t.Fatalf("replica %d elected after %s, before every follower found the old leader silent (%v)", n, time.Since(start), found)
				}
			}
			for i := range g.rafts {
				if _, ok := found[i]; !ok && i != old && silent(i) {
					found[i] = time.Since(start)
				}
			}
			if silent(old) {
				t.Fatal("the leader found itself silent")
			}
			time.Sleep(time.Millisecond)
		}
		for i, d := range found {
			// The last heartbeat came at most one grid period before the cut.
			if d > silence+2*time.Millisecond {
				t.Errorf("replica %d found its cut leader silent after %s, want within %s", i, d, silence)
			}
		}
		g.heal(old)
	})
}
