package cluster

import (
	"testing"
	"testing/synctest"
)

func TestPlanRetention(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name                string
		budget, state, log  int64
		entries             int
		trailing, threshold uint64
		snapshot            bool
	}{
		{"no budget: raft's counts", 0, 0, 10 << 30, 4096, 2048, 4096, false},
		{"an empty log", 64 * mib, 0, 0, 0, 2048, 4096, false},
		{"small entries: raft's counts", 64 * mib, 0, 4 * mib, 4096, 2048, 4096, false},
		// 1 MiB entries (4,096 checks of 250-byte keys): 64 between
		// snapshots at most, 32 kept after one.
		{"large entries", 64 * mib, 0, 100 * mib, 100, 32, 64, true},
		// 16 MiB entries: the least counts.
		{"huge entries", 64 * mib, 0, 160 * mib, 10, 8, 16, true},
		{"64 KiB entries", 64 * mib, 0, 32 * mib, 512, 512, 1024, false},
		// a power of two below: 64 MiB / 100 KB = 671 -> 512.
		{"100 KB entries", 64 * mib, 0, 10_000_000, 100, 256, 512, false},
		// The states hold more than the budget: the log may hold as much.
		{"large states", 64 * mib, 512 * mib, 256 * mib, 4096, 2048, 4096, false},
		{"large states, larger entries", 64 * mib, 512 * mib, 1024 * mib, 1024, 256, 512, true},
		// Past one and a half budgets: snapshot now (an idle group after a
		// burst), not at one.
		{"at 1.5 budgets", 64 * mib, 0, 96 * mib, 96, 32, 64, false},
		{"past 1.5 budgets", 64 * mib, 0, 96*mib + 1, 96, 32, 64, true},
	}
	for _, c := range cases {
		got := planRetention(c.budget, c.state, c.log, c.entries)
		want := retention{trailing: c.trailing, threshold: c.threshold, snapshot: c.snapshot}
		if got != want {
			t.Errorf("%s: %+v, want %+v", c.name, got, want)
		}
	}
}

// The pacer runs a group's retention in both its timings: the leader's
// and the followers' raft take the new counts at once, and keep them
// across a change of leader (the pacer switches timing on each).
func TestPacerRetains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, ps := pacedGroup(t)
		defer closePaced(g, ps)
		for _, p := range ps {
			p.retain(128, 256)
		}
		want := func() {
			t.Helper()
			for i, r := range g.rafts {
				if rc := r.ReloadableConfig(); rc.TrailingLogs != 128 || rc.SnapshotThreshold != 256 {
					t.Fatalf("replica %d (%s): trailing %d, threshold %d; want 128, 256", i, r.State(), rc.TrailingLogs, rc.SnapshotThreshold)
				}
			}
		}
		want()
		moveLeader(t, g)
		want()
		wantTiming(t, g)
	})
}
