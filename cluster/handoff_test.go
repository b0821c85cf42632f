package cluster

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

// A hand-off to a replica the leader cannot reach refuses the group's
// writes only for the election timeout the group was configured with
// (100ms here), not for the leader's paced one (leaderTimeouts grid
// periods, 200ms here; 2s with the default flags). hashicorp/raft bounds a
// transfer by the leader's election timeout and refuses every write
// (ErrLeadershipTransferInProgress) until it ends. In the fault suite a
// preferred leader whose link flapped had the reconciler hand it its
// shards every transferCooldown; each try that found the link cut stalled
// the shard's writes for 2s (checks refused as "not the leader" until
// their --leader-wait ran out), while the old leader and the third
// replica were connected both ways the whole time.
func TestFailedHandOffStallsWritesOnlyAnElectionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, ps := pacedGroup(t)
		defer closePaced(g, ps)
		l := g.leader()
		to := (l + 1) % 3
		// The target's link is cut: replication to it fails, so the
		// transfer cannot catch it up and waits for raft's bound.
		g.trans[l].Disconnect(g.trans[to].LocalAddr())
		g.trans[to].Disconnect(g.trans[l].LocalAddr())
		if err := g.rafts[l].Barrier(time.Second).Error(); err != nil {
			t.Fatal(err) // committed with the third replica; the target lacks it
		}
		grp := &Group{name: "shard-0", raft: g.rafts[l], pace: ps[l]}
		target := &raft.Server{ID: raft.ServerID(g.trans[to].LocalAddr()), Address: g.trans[to].LocalAddr()}
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- grp.transferLeadership(context.Background(), target) }()
		time.Sleep(time.Millisecond)
		var refused time.Duration
		for {
			err := g.rafts[l].Barrier(50 * time.Millisecond).Error()
			if err == nil {
				break
			}
			if !errors.Is(err, raft.ErrLeadershipTransferInProgress) {
				t.Fatalf("write refused with %v", err)
			}
			refused = time.Since(start)
			if refused > 5*time.Second {
				t.Fatal("writes still refused after 5s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := <-done; err == nil {
			t.Fatal("a hand-off to an unreachable replica succeeded")
		}
		if g.leader() != l {
			t.Fatalf("leader %d, want %d still", g.leader(), l)
		}
		if want := 100 * time.Millisecond; refused > want+10*time.Millisecond {
			t.Fatalf("the failed hand-off refused writes for %s, want at most the election timeout, %s", refused, want)
		}
		// Afterwards the leader runs its paced timing again.
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		wantTiming(t, g)
	})
}
