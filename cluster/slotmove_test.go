package cluster

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/window"
)

// hourly is a strict policy of n checks an hour.
func hourly(n int64) *policy.Policy {
	return &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: n, Window: int64(time.Hour)}}}}
}

// heldShard is a shard state machine whose command entries can be held
// back while their Raft group commits them: a leader's state machine
// behind its log, as a new leader's is until it has applied what its
// predecessors committed (or a restarted one, its log since its last
// snapshot).
type heldShard struct {
	shard *fsm.Shard
	mu    sync.Mutex
	open  chan struct{} // closed: entries apply
}

func newHeldShard() *heldShard {
	h := &heldShard{shard: fsm.NewShard(), open: make(chan struct{})}
	close(h.open)
	return h
}

func (h *heldShard) Apply(l *raft.Log) any {
	if l.Type == raft.LogCommand {
		h.mu.Lock()
		open := h.open
		h.mu.Unlock()
		<-open
	}
	return h.shard.Apply(l)
}

func (h *heldShard) Snapshot() (raft.FSMSnapshot, error) { return h.shard.Snapshot() }
func (h *heldShard) Restore(rc io.ReadCloser) error      { return h.shard.Restore(rc) }

// hold makes the entries committed from now on wait; release lets them
// apply.
func (h *heldShard) hold() {
	h.mu.Lock()
	h.open = make(chan struct{})
	h.mu.Unlock()
}

func (h *heldShard) release() {
	h.mu.Lock()
	close(h.open)
	h.mu.Unlock()
}

// oneRaft starts a bootstrapped one-replica Raft group in memory over f
// and waits until it leads (in a synctest bubble: fake time).
func oneRaft(t *testing.T, id string, f raft.FSM) *raft.Raft {
	t.Helper()
	r, _ := oneRaftStore(t, id, f)
	return r
}

// oneRaftStore is oneRaft, with its stores as a Group holds them.
func oneRaftStore(t *testing.T, id string, f raft.FSM) (*raft.Raft, *groupStore) {
	t.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(id)
	conf.Logger = hclog.NewNullLogger()
	conf.HeartbeatTimeout, conf.ElectionTimeout = 50*time.Millisecond, 50*time.Millisecond
	conf.LeaderLeaseTimeout, conf.CommitTimeout = 50*time.Millisecond, 5*time.Millisecond
	store := raft.NewInmemStore()
	addr, trans := raft.NewInmemTransport(raft.ServerAddress(id))
	r, err := raft.NewRaft(conf, f, store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	for r.State() != raft.Leader {
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	return r, &groupStore{logs: store, state: store}
}

// moveRig is one node leading the meta group of a cluster of 4 slots and
// its groups 0 and 1, each a one-replica group in memory: the slot move
// reconcilers run on it as on a real node, without a network. Group 0's
// state machine can be held behind its log.
type moveRig struct {
	t    *testing.T
	n    *Node
	meta *raft.Raft
	g0   *heldShard
	r0   *raft.Raft
	g1   *fsm.Shard
	r1   *raft.Raft
}

func newMoveRig(t *testing.T) *moveRig {
	rig := &moveRig{t: t, g0: newHeldShard(), g1: fsm.NewShard()}
	metaFSM := fsm.NewMeta()
	var metaStore *groupStore
	rig.meta, metaStore = oneRaftStore(t, "meta", metaFSM)
	rig.r0, rig.r1 = oneRaft(t, "g0", rig.g0), oneRaft(t, "g1", rig.g1)
	lane := func(r *raft.Raft, s *fsm.Shard) *fastLane {
		l := newFastLane(r, s, testFastConfig(), nil, func() error { return &NotLeaderError{} })
		t.Cleanup(l.close)
		return l
	}
	rig.n = &Node{
		cfg: Config{NodeID: "n1", CommitTimeout: time.Second}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		meta: &Group{raft: rig.meta, store: metaStore}, metaFSM: metaFSM,
		shards: map[int]*replica{
			0: {id: 0, group: &Group{raft: rig.r0}, fsm: rig.g0.shard, fast: lane(rig.r0, rig.g0.shard)},
			1: {id: 1, group: &Group{raft: rig.r1}, fsm: rig.g1, fast: lane(rig.r1, rig.g1)},
		},
	}
	// Group 0 owns the 4 slots; group 1 is new and owns none.
	rig.metaApply(fsm.MetaInitCluster, &metav1.InitCluster{ClusterId: "c", Replicas: 1, Slots: 4, GroupsPerNode: 1, Home: "n1"})
	rig.metaApply(fsm.MetaAddGroup, &metav1.AddGroup{Home: "n1"})
	rig.apply(rig.r0, fsm.EncodeInit(0, 4, []uint32{0, 1, 2, 3}))
	rig.apply(rig.r1, fsm.EncodeInit(1, 4, nil))
	return rig
}

func (rig *moveRig) metaApply(typ byte, msg proto.Message) {
	rig.t.Helper()
	if err := rig.n.applyMeta(context.Background(), typ, msg); err != nil {
		rig.t.Fatal(err)
	}
}

// apply writes entry to r and waits for it: r's state machine must not
// be held.
func (rig *moveRig) apply(r *raft.Raft, entry []byte) any {
	rig.t.Helper()
	f := r.Apply(entry, time.Second)
	if err := f.Error(); err != nil {
		rig.t.Fatal(err)
	}
	if err, ok := f.Response().(error); ok {
		rig.t.Fatal(err)
	}
	return f.Response()
}

// count checks key on group r at cost, strictly, hourly(10): the count
// after the check, or -1 when the group does not own the key.
func (rig *moveRig) count(r *raft.Raft, key string, cost int64) int64 {
	rig.t.Helper()
	p := hourly(10)
	f := r.Apply(fsm.EncodeAllow(nil, time.Now().UnixNano(), []fsm.Check{{Key: key, Policy: p, Cost: cost}}), time.Second)
	if err := f.Error(); err != nil {
		rig.t.Fatal(err)
	}
	switch res := f.Response().(type) {
	case []policy.Result:
		return 10 - res[0].Remaining
	case *fsm.AllowResults:
		if res.NotOwned[0] {
			return -1
		}
		return 10 - res.Results[0].Remaining
	default:
		rig.t.Fatalf("allow: %v", res)
	}
	return 0
}

// keyOfSlot returns a key of slot x of 4.
func keyOfSlot(x int) string {
	for i := 0; ; i++ {
		if k := string(rune('a'+i%26)) + string(rune('a'+i/26)); hashing.ShardOf(k, 4) == x {
			return k
		}
	}
}

// A move into a group whose leader's state machine is behind its log
// (a new leader that has not applied what its predecessor committed) must
// still be imported. Slot 3 went from group 0 to group 1 and is coming
// back; group 0's state machine still shows slot 3 owned, as before it
// froze the slot for the first move. The target's reconciler took that
// for "imported already" and closed the move: once the held entries
// applied, the slot was owned by no group, and its counts were gone with
// the source's drop.
func TestImportByLaggingLeaderIsWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newMoveRig(t)
		k := keyOfSlot(3)
		// mirror is group 0 as it is once it applied move 1's freeze,
		// which group 0's state machine will not have applied.
		mirror := fsm.NewShard()
		count := fsm.EncodeAllow(nil, time.Now().UnixNano(), []fsm.Check{{Key: k, Policy: hourly(10), Cost: 3}})
		rig.apply(rig.r0, count)
		for i, e := range [][]byte{fsm.EncodeInit(0, 4, []uint32{0, 1, 2, 3}), count, fsm.EncodeFreeze(1, []uint32{3})} {
			if resp, ok := mirror.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: e}).(error); ok {
				t.Fatal(resp)
			}
		}
		// Move 1 takes slot 3 to group 1. Group 0 commits its freeze and
		// drop, but its state machine applies neither yet.
		rig.metaApply(fsm.MetaPlanMoves, &metav1.PlanMoves{Moves: []*metav1.Move{{From: 0, To: 1, Slots: []uint32{3}}}})
		rig.g0.hold()
		rig.r0.Apply(fsm.EncodeFreeze(1, []uint32{3}), time.Second)
		rig.metaApply(fsm.MetaMoveFrozen, &metav1.MoveFrozen{Move: 1})
		rig.apply(rig.r1, fsm.EncodeImport(1, 0, []uint32{3}, mustExport(t, mirror, 1, 3)))
		rig.metaApply(fsm.MetaMoveImported, &metav1.MoveImported{Move: 1})
		rig.r0.Apply(fsm.EncodeDrop(1), time.Second)
		if got := rig.count(rig.r1, k, 4); got != 7 {
			t.Fatalf("group 1 counts %d, want 7", got)
		}
		// Move 2 brings slot 3 back; group 1 freezes it and the table flips.
		rig.metaApply(fsm.MetaPlanMoves, &metav1.PlanMoves{Moves: []*metav1.Move{{From: 1, To: 0, Slots: []uint32{3}}}})
		rig.apply(rig.r1, fsm.EncodeFreeze(2, []uint32{3}))
		rig.metaApply(fsm.MetaMoveFrozen, &metav1.MoveFrozen{Move: 2})

		done := make(chan struct{})
		go func() {
			defer close(done)
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			rig.n.reconcileSlots(ctx, rig.n.shards[0], rig.n.View())
		}()
		synctest.Wait()
		rig.g0.release()
		<-done
		synctest.Wait()
		if got := rig.count(rig.r0, k, 0); got != 7 {
			t.Errorf("group 0 counts %d for the key after move 2 (-1: not owned), want the 7 counted before", got)
		}
		if v := rig.n.View(); v.Move(2) != nil {
			t.Errorf("move 2 still open: %+v", v.Move(2))
		}
	})
}

// reconcile runs group g's slot reconciler once on view v, as the
// group's leader does on every pass, and waits for it.
func (rig *moveRig) reconcile(g int, v *fsm.MetaView) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	rig.n.reconcileSlots(ctx, rig.n.shards[g], v)
	synctest.Wait()
}

// move runs a move of slots from one group to the other through the
// reconcilers, from its plan to the source's drop.
func (rig *moveRig) move(from, to int, slots ...uint32) {
	rig.t.Helper()
	rig.metaApply(fsm.MetaPlanMoves, &metav1.PlanMoves{Moves: []*metav1.Move{{From: uint32(from), To: uint32(to), Slots: slots}}})
	id := rig.n.View().NextMove - 1
	rig.reconcile(from, rig.n.View()) // freeze, flip
	rig.reconcile(to, rig.n.View())   // import, close
	rig.reconcile(from, rig.n.View()) // drop
	if v := rig.n.View(); !v.MoveDone(id) {
		rig.t.Fatalf("move %d not done: %+v", id, v.Move(id))
	}
}

// A leader whose meta view is behind (a lagging or cut-off replica of the
// meta group; preferred leaders take over groups on their own log's
// progress alone) may still see as planned a move long finished. It must
// not take a slot that has since come back to the group by a later move:
// the slot stayed frozen by the old move, which is done, so the group
// dropped it at its next pass, while the table names the group: owned by
// none, its counts gone. The leader asks the meta leader first, and writes
// no freeze for a move done (stillPlanned); the state machine would spare
// the slot anyway (fsm's TestStaleFreezeSparesReturnedSlot), as a replica
// of an older release's leader needs.
func TestStaleFreezeSparesSlotsBackByALaterMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newMoveRig(t)
		k := keyOfSlot(3)
		rig.count(rig.r0, k, 3)
		rig.metaApply(fsm.MetaPlanMoves, &metav1.PlanMoves{Moves: []*metav1.Move{{From: 0, To: 1, Slots: []uint32{3}}}})
		stale := rig.n.View() // move 1 planned
		rig.reconcile(0, rig.n.View())
		rig.reconcile(1, rig.n.View())
		rig.reconcile(0, rig.n.View())
		rig.move(1, 0, 3) // move 2 brings slot 3 back
		if got := rig.count(rig.r0, k, 1); got != 4 {
			t.Fatalf("group 0 counts %d after the moves, want 4", got)
		}
		last := rig.r0.LastIndex()
		rig.reconcile(0, stale)
		if got := rig.r0.LastIndex(); got != last {
			t.Errorf("a leader whose view still plans move 1 wrote %d entries (a freeze of a move done)", got-last)
		}
		rig.reconcile(0, rig.n.View())
		if got := rig.count(rig.r0, k, 0); got != 4 {
			t.Errorf("group 0 counts %d (-1: not owned) after a stale freeze, want 4", got)
		}
	})
}

// mustExport exports slot x, frozen by move, from s.
func mustExport(t *testing.T, s *fsm.Shard, move uint64, x uint32) []byte {
	t.Helper()
	b, err := s.ExportSlots(move, []uint32{x})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
