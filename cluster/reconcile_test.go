package cluster

import (
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// What the reconciler keeps of a group goes with the group's last replica
// here, and a transfer is forgotten once its cooldown is over: a node
// outlives every group moved off or removed from it, and kept an entry
// of each for good.
func TestReconcilerForgetsGoneGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := reconcileState{leaderSince: map[int]time.Time{}, lastTransfer: map[int]time.Time{}}
		now := time.Now()
		for _, id := range []int{1, 2, 3} {
			rc.leaderSince[id] = now
			rc.lastTransfer[id] = now
		}
		local := []*replica{{id: 2}, {id: 3}}
		rc.forgetGone(local)
		if got := slices.Sorted(maps.Keys(rc.leaderSince)); !slices.Equal(got, []int{2, 3}) {
			t.Errorf("leaderSince of %v with replicas of 2 and 3", got)
		}
		if len(rc.lastTransfer) != 3 {
			t.Errorf("transfers within their cooldown: %d kept, want 3", len(rc.lastTransfer))
		}
		time.Sleep(transferCooldown)
		rc.forgetGone(local)
		if len(rc.lastTransfer) != 0 {
			t.Errorf("transfers past their cooldown: %d kept, want 0", len(rc.lastTransfer))
		}
	})
}
