package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// checkCounts checks s's slot counts against its records: each slot's
// count, the gone slots (dropped, with records left) and the orphans.
func checkCounts(t *testing.T, s *Shard) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.tab.counts
	if c == nil {
		t.Fatal("a group with slots has no slot counts")
	}
	n := make([]uint32, len(c.n))
	s.tab.each(func(r *record) { n[c.slotOf(r.id)]++ })
	orphans := 0
	for x := range n {
		if n[x] != c.n[x] {
			t.Fatalf("slot %d: counted %d records, holds %d", x, c.n[x], n[x])
		}
		absent := s.own.state[x] == slotAbsent
		if c.gone[x] != (absent && n[x] > 0) {
			t.Fatalf("slot %d: gone %v, absent %v with %d records", x, c.gone[x], absent, n[x])
		}
		if c.gone[x] {
			orphans += int(n[x])
		}
	}
	if orphans != c.orphans {
		t.Fatalf("%d orphans counted, %d held", c.orphans, orphans)
	}
}

// orphanGroup is a group of 4 slots holding n keys with a sliding log of
// limit 5 per hour, each checked once; it returns the keys by slot.
func orphanGroup(t *testing.T, n int) (*group, [][]string) {
	g := newGroup(t, 1, 4, 0, 1, 2, 3)
	bySlot := make([][]string, 4)
	var checks []Check
	p := hourly(5)
	for i := range n {
		k := keyIn(i%4, 4, i)
		bySlot[i%4] = append(bySlot[i%4], k)
		checks = append(checks, Check{Key: k, Policy: p, Cost: 1})
	}
	g.now += 1000
	if _, ok := g.apply(EncodeAllow(nil, g.now, checks)).([]policy.Result); !ok {
		t.Fatal("the group refused its own keys")
	}
	return g, bySlot
}

func hourly(n int64) *policy.Policy {
	return inline(window.Limit{Algorithm: window.SlidingLog, Limit: n, Window: 3600e9})
}

// moveAway freezes slot x, exports it and drops it, as a move's source
// does; it returns the export.
func (g *group) moveAway(move uint64, x uint32) []byte {
	g.t.Helper()
	g.mustApply(EncodeFreeze(move, []uint32{x}))
	exp, err := g.s.ExportSlots(move, []uint32{x})
	if err != nil {
		g.t.Fatal(err)
	}
	g.mustApply(EncodeDrop(move))
	return exp
}

// A drop frees nothing itself: the slot's states become orphans, out of
// the group's count, and later entries free them a bounded number of
// records at a time.
func TestDropLeavesOrphansToTheSweeper(t *testing.T) {
	g, bySlot := orphanGroup(t, 8000)
	live := g.s.tab.live
	g.moveAway(1, 2)
	st := g.s.Stats()
	if st.Orphans != len(bySlot[2]) || st.States != 6000 || g.s.tab.live != live {
		t.Fatalf("after the drop: %+v, %d records (want %d orphans of %d records)", st, g.s.tab.live, len(bySlot[2]), live)
	}
	checkCounts(t, g.s)
	if _, refused := g.allow(bySlot[2][0], 5); !refused {
		t.Fatal("a check of a dropped slot was counted")
	}
	entries := 0
	for g.s.Stats().Orphans > 0 {
		before := g.s.tab.live
		g.now += 1000
		g.mustApply(EncodeTick(g.now))
		entries++
		if freed := before - g.s.tab.live; freed > orphanSweep {
			t.Fatalf("one entry freed %d records, more than the sweeper's step %d", freed, orphanSweep)
		}
		if entries > 2*live/orphanSweep+2 {
			t.Fatalf("orphans left after %d entries: %+v", entries, g.s.Stats())
		}
	}
	if g.s.tab.live != 6000 || g.s.Stats().States != 6000 {
		t.Fatalf("after the sweep: %d records, %+v", g.s.tab.live, g.s.Stats())
	}
	checkCounts(t, g.s)
	if ok, _ := g.allow(bySlot[1][0], 1); ok {
		t.Fatal("a held slot's count was lost: a key checked once admitted again at limit 1")
	}
}

// A slot that comes back before its orphans are swept holds what the
// import brings, never the orphans: a key counted elsewhere since carries
// the export's count, and a key the export leaves out (reset, expired)
// starts afresh.
func TestImportIntoAGoneSlot(t *testing.T) {
	g, bySlot := orphanGroup(t, 400)
	g.s.tab.counts.step = 1
	stay, reset := bySlot[3][0], bySlot[3][1]
	exp := g.moveAway(1, 3)
	// Elsewhere: stay counted three more times, reset reset.
	o := newGroup(t, 2, 4)
	o.mustApply(EncodeImport(1, 1, []uint32{3}, exp))
	for range 3 {
		o.allow(stay, 5)
	}
	if n := o.apply(EncodeReset(o.now, reset, hourly(5))); n != 1 {
		t.Fatalf("reset: %v", n)
	}
	back := o.moveAway(2, 3)
	if g.s.Stats().Orphans == 0 {
		t.Fatal("the orphans were swept already: the test needs them")
	}
	g.mustApply(EncodeImport(2, 2, []uint32{3}, back))
	checkCounts(t, g.s)
	if st := g.s.Stats(); st.Orphans != 0 || st.States != 400-1 {
		t.Fatalf("after the import: %+v, want 399 states and no orphans", st)
	}
	if ok, _ := g.allow(stay, 5); !ok {
		t.Fatal("stay: 4 of 5 counted, refused")
	}
	if ok, _ := g.allow(stay, 5); ok {
		t.Fatal("stay admitted a sixth time: the import's count was not the one kept")
	}
	for i := range 5 {
		if ok, _ := g.allow(reset, 5); !ok {
			t.Fatalf("reset: check %d of 5 refused: the orphan's count came back", i+1)
		}
	}
}

// Snapshots and backups leave orphans out (they are not the group's), and
// a snapshot that carries states of a slot its ownership record says is
// absent restores them as orphans: never read, swept, never written.
func TestOrphansInSnapshots(t *testing.T) {
	g, bySlot := orphanGroup(t, 2000)
	g.s.tab.counts.step = 1
	full := stopTheWorld(t, g.s)
	g.moveAway(1, 0)
	want := stopTheWorld(t, g.s)
	if bytes.Equal(want, full) || g.s.Stats().Orphans != 500 {
		t.Fatalf("the reference still holds slot 0's states (%d orphans)", g.s.Stats().Orphans)
	}
	snap, err := g.s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got := persist(t, snap); !bytes.Equal(got, want) {
		t.Fatal("a snapshot wrote orphans")
	}
	backup, err := g.s.ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	tab, _, _, err := decodeShardSnapshot(backup)
	if err != nil {
		t.Fatal(err)
	}
	if tab.live != 1500 {
		t.Fatalf("a backup of 1500 states holds %d", tab.live)
	}

	// A snapshot of slot 0's states beside an ownership record without
	// slot 0, as a binary that wrote orphans would make.
	o := g.s.Ownership()
	mixed := &shardSnapshot{now: g.now, own: appendOwnership(nil, g.s.own)}
	decoded, _, _, err := decodeShardSnapshot(full)
	if err != nil {
		t.Fatal(err)
	}
	decoded.each(func(r *record) {
		if err := mixed.add(r); err != nil {
			t.Fatal(err)
		}
	})
	var w sliceWriter
	if err := mixed.writeTo(&w); err != nil {
		t.Fatal(err)
	}
	r := newGroup(t, 9, 4)
	if err := r.s.Restore(io.NopCloser(bytes.NewReader(w))); err != nil {
		t.Fatal(err)
	}
	r.index, r.now = g.index, g.now
	if st := r.s.Stats(); st.States != 1500 || st.Orphans != 500 || fmt.Sprint(r.s.Ownership()) != fmt.Sprint(o) {
		t.Fatalf("restored %+v, ownership %+v", st, r.s.Ownership())
	}
	checkCounts(t, r.s)
	if got := stopTheWorld(t, r.s); !bytes.Equal(got, want) {
		t.Fatal("the restored group's states differ from the group's")
	}
	if _, refused := r.allow(bySlot[0][0], 5); !refused {
		t.Fatal("a restored orphan's slot counted a check")
	}
	for i := 0; r.s.Stats().Orphans > 0; i++ {
		if i > 2000 {
			t.Fatalf("restored orphans never swept: %+v", r.s.Stats())
		}
		r.now += 1000
		r.mustApply(EncodeTick(r.now))
	}
	checkCounts(t, r.s)
}

// The leader's bound on states counts the group's own: orphans, which
// the sweeper is about to free, do not make it refuse new keys.
func TestVetLeavesOrphansOut(t *testing.T) {
	g, _ := orphanGroup(t, 1000)
	g.s.tab.counts.step = 1
	g.moveAway(1, 1)
	checks := []Check{{Key: keyIn(2, 4, 5000), Policy: hourly(5), Cost: 1}}
	if v := judge(g.s, checks, Room{States: 760}); v != Take {
		t.Fatalf("750 states and 250 orphans at a bound of 760: %v", v)
	}
	if v := judge(g.s, checks, Room{States: 750}); v != Full {
		t.Fatalf("750 states at a bound of 750: %v", v)
	}
}

// Random drops, imports back, checks, resets, ticks, backup restores and
// raft restores keep every slot's count exact.
func TestSlotCountsStayExact(t *testing.T) {
	forSeeds(t, 12, func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 3))
		const slots = 8
		g := newGroup(t, 1, slots, 0, 1, 2, 3, 4, 5, 6, 7)
		g.s.tab.counts.step = 1 + rng.IntN(8)
		away := map[uint32]bool{}
		move := uint64(0)
		var older []byte
		for step := range 600 {
			switch op := rng.IntN(10); {
			case op < 5:
				var checks []Check
				for range 1 + rng.IntN(40) {
					checks = append(checks, Check{Key: fmt.Sprintf("k%d", rng.IntN(600)), Policy: hourly(int64(2 + rng.IntN(3))), Cost: 1})
				}
				g.now += int64(rng.IntN(2000)) * 1e6
				g.apply(EncodeAllow(nil, g.now, checks))
			case op < 6:
				g.apply(EncodeReset(g.now, fmt.Sprintf("k%d", rng.IntN(600)), hourly(int64(2+rng.IntN(3)))))
			case op < 7:
				g.now += int64(rng.IntN(4000)) * 1e9
				g.mustApply(EncodeTick(g.now))
			case op < 9:
				x := uint32(rng.IntN(slots))
				move++
				if away[x] {
					empty, _ := NewShard().ExportAll()
					g.mustApply(EncodeImport(move, 2, []uint32{x}, empty))
					delete(away, x)
				} else {
					g.moveAway(move, x)
					away[x] = true
				}
			default:
				if older != nil && rng.IntN(3) == 0 {
					if err := g.s.Restore(io.NopCloser(bytes.NewReader(older))); err != nil {
						t.Fatal(err)
					}
					g.s.tab.counts.step = 1 + rng.IntN(8)
					away = map[uint32]bool{}
					owned := map[uint32]bool{}
					for _, x := range g.s.Ownership().Owned {
						owned[x] = true
					}
					for x := range uint32(slots) {
						away[x] = !owned[x]
					}
					g.now = max(g.now, g.s.Stats().Now)
				} else {
					snap, err := g.s.Snapshot()
					if err != nil {
						t.Fatal(err)
					}
					older = persist(t, snap)
				}
			}
			if step%7 == 0 {
				checkCounts(t, g.s)
			}
		}
		checkCounts(t, g.s)
	})
}

// An import whose entry is refused leaves a gone slot's orphans and
// counts as they were.
func TestRefusedImportKeepsOrphans(t *testing.T) {
	g, _ := orphanGroup(t, 400)
	g.s.tab.counts.step = 1
	g.moveAway(1, 2)
	before := g.s.Stats()
	r := g.apply(EncodeImport(2, 2, []uint32{2}, []byte("nope")))
	if err, ok := r.(error); !ok || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a bad import: %v", r)
	}
	if st := g.s.Stats(); st != before {
		t.Fatalf("a refused import changed the group: %+v, was %+v", st, before)
	}
	checkCounts(t, g.s)
}

// A freeze of a finished move (a stale leader's) leaves alone a slot a
// later move brought back: frozen by it, the slot would be dropped as that
// move's leftover while the group is its owner.
func TestStaleFreezeSparesReturnedSlot(t *testing.T) {
	a, b := newGroup(t, 0, 4, 0, 1), newGroup(t, 1, 4, 2, 3)
	k := keyIn(1, 4, 0)
	a.allow(k, 5)
	b.mustApply(EncodeImport(3, 0, []uint32{1}, a.moveAway(3, 1)))
	a.mustApply(EncodeImport(7, 1, []uint32{1}, b.moveAway(7, 1)))
	a.mustApply(EncodeFreeze(3, []uint32{1}))
	if info := a.s.Ownership(); len(info.Frozen) != 0 || !a.s.Owns(k) {
		t.Fatalf("a stale freeze took the slot back by move 7: %+v", info)
	}
	if ok, refused := a.allow(k, 2); !ok || refused {
		t.Errorf("admitted %v, refused %v: want the second check of two admitted", ok, refused)
	}
}

// A restore's count of the states it leaves the group holding (the
// leader's --max-key-states bound, HeldAfterRestore) counts a state whose
// only record is an orphan as one to add: the orphan is not the group's,
// and the slot's import back, which may apply before the restore, frees
// it. Counted as held, the bound came out under what the group then held.
func TestHeldAfterRestoreLeavesOrphansOut(t *testing.T) {
	g, bySlot := orphanGroup(t, 1000)
	g.s.tab.counts.step = 1
	states := g.moveAway(1, 1)
	if n, err := CountStates(states); err != nil || n.States != len(bySlot[1]) {
		t.Fatalf("the export holds %+v states (%v), want %d", n, err, len(bySlot[1]))
	}
	held, _, err := g.s.HeldAfterRestore(states)
	if err != nil {
		t.Fatal(err)
	}
	empty, _ := NewShard().ExportAll()
	g.mustApply(EncodeImport(2, 2, []uint32{1}, empty))
	g.mustApply(EncodeRestore(states))
	if got := g.s.Stats(); held.States < got.States || held.Bytes < got.Bytes {
		t.Fatalf("HeldAfterRestore said %+v, the group then held %d states of %d bytes", held, got.States, got.Bytes)
	}
}

// Vet's needs and missing look records up with lookup, not holds: right
// because an owned slot never has orphans. A slot dropped and imported
// back before the sweeper reached its orphans frees them at the import
// (importSlots), so a fast decision pending on a key of it, and a check of
// a new key there, are counted exactly against the bound.
func TestVetOnSlotImportedBackBeforeTheSweep(t *testing.T) {
	g, _ := orphanGroup(t, 400)
	g.s.tab.counts.step = 1
	exp := g.moveAway(1, 3)
	o := newGroup(t, 2, 4)
	o.mustApply(EncodeImport(1, 1, []uint32{3}, exp))
	back := o.moveAway(2, 3)
	if g.s.Stats().Orphans == 0 {
		t.Fatal("the orphans were swept already: the test needs them")
	}
	g.mustApply(EncodeImport(2, 2, []uint32{3}, back))
	checkCounts(t, g.s)
	p := hourly(5)
	pending, fresh := keyIn(3, 4, 9000), keyIn(3, 4, 9001)
	if res, _, _ := g.s.FastEval(p, pending, 1, g.now+1000, false); !res.Allowed {
		t.Fatal("fast check refused")
	}
	// 400 states held, 1 on its way.
	if v := judge(g.s, []Check{{Key: pending, Policy: p, Cost: 1}}, Room{States: 401}); v != Take {
		t.Errorf("the pending key at a bound of 401: %v, want Take", v)
	}
	if v := judge(g.s, []Check{{Key: fresh, Policy: p, Cost: 1}}, Room{States: 402}); v != Take {
		t.Errorf("a new key at a bound of 402: %v, want Take", v)
	}
	if v := judge(g.s, []Check{{Key: fresh, Policy: p, Cost: 1}}, Room{States: 401}); v != Full {
		t.Errorf("a new key at a bound of 401: %v, want Full", v)
	}
}
