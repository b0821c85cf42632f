package cluster

import (
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
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
		// 16 MiB entries: the least counts; a snapshot only when the
		// compaction after it frees half a budget at least: a log of no
		// more entries than trailing keeps stays as it is (snapshotted
		// again and again, an idle group wrote its whole state every 5 s).
		{"many huge entries", 64 * mib, 0, 1600 * mib, 100, 16, 32, true},
		{"a few huge entries", 64 * mib, 0, 160 * mib, 10, 16, 32, false},
		{"trailing's huge entries", 4 * mib, 0, 32 * mib, 16, 16, 32, false},
		{"trailing's and half a budget", 4 * mib, 0, 34 * mib, 17, 16, 32, true},
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

// countingFSM counts the snapshots raft takes of it.
type countingFSM struct {
	*fsm.Shard
	snaps atomic.Int32
}

func (c *countingFSM) Snapshot() (raft.FSMSnapshot, error) {
	c.snaps.Add(1)
	return c.Shard.Snapshot()
}

// fakeLog is a log whose size the test says.
type fakeLog struct {
	entries int
	bytes   int64
}

func (f *fakeLog) Size() (int, int64) { return f.entries, f.bytes }

// A group whose log is due for a snapshot gets one, and no other until it
// has applied more: raft takes another at the same index when asked, so
// an idle group whose log cannot shrink (its trailing entries are huge)
// wrote its whole state every 5 s. A retainer of a stopping node, or of
// a closing group, asks for none.
func TestRetainerSnapshotsOncePerApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := raft.DefaultConfig()
		rc.LocalID = "r0"
		rc.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Off})
		rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
		rc.SnapshotInterval = time.Hour // raft's own never comes
		f := &countingFSM{Shard: fsm.NewShard()}
		addr, tr := raft.NewInmemTransport("r0")
		r, err := raft.NewRaft(rc, f, raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore(), tr)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Shutdown()
		if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "r0", Address: addr}}}).Error(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		p := startPacer(r, "r0", "shard", followerTiming(rc), newGrid(testEvery), nil)
		defer p.close()
		ts := int64(1_700_000_000_000_000_000)
		apply := func() {
			ts += int64(time.Second)
			if err := r.Apply(fsm.EncodeTick(ts), time.Second).Error(); err != nil {
				t.Fatal(err)
			}
		}
		apply()
		// 100 entries of 1 MiB under a budget of 4 MiB: due.
		rt := &retainer{raft: r, pace: p, log: &fakeLog{entries: 100, bytes: 100 << 20}}
		stop := make(chan struct{})
		step := func() {
			rt.step(4<<20, 0, stop)
			rt.wg.Wait()
		}
		step()
		if got := f.snaps.Load(); got != 1 {
			t.Fatalf("%d snapshots of a log due, want 1", got)
		}
		for range 3 {
			step()
		}
		if got := f.snaps.Load(); got != 1 {
			t.Fatalf("%d snapshots with nothing applied since the first, want 1", got)
		}
		apply()
		step()
		if got := f.snaps.Load(); got != 2 {
			t.Fatalf("%d snapshots once more was applied, want 2", got)
		}
		if rc := r.ReloadableConfig(); rc.TrailingLogs != 16 || rc.SnapshotThreshold != 32 {
			t.Fatalf("raft runs trailing %d, threshold %d; want 16, 32", rc.TrailingLogs, rc.SnapshotThreshold)
		}
		apply()
		close(stop)
		step()
		if got := f.snaps.Load(); got != 2 {
			t.Fatalf("%d snapshots asked by a stopping node, want 2", got)
		}
		stop = make(chan struct{})
		rt.close()
		step()
		if got := f.snaps.Load(); got != 2 {
			t.Fatalf("%d snapshots asked of a closing group, want 2", got)
		}
	})
}
