package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

// checkWatch checks a ready watch: it is still the table's, and every
// live record of a watched slot is on its list.
func checkWatch(t *testing.T, tab *table, w *slotWatch) {
	t.Helper()
	if !w.ready() || !slices.Contains(tab.watches, w) {
		t.Fatalf("checkWatch of a watch unfilled (%v) or dropped (%v)", !w.ready(), !slices.Contains(tab.watches, w))
	}
	on := map[uint32]bool{}
	for _, n := range w.recs {
		on[n] = true
	}
	for n := uint32(0); n < tab.used; n++ {
		if id := tab.rec(n).id; id != "" && w.in[slotOfID(id, len(w.in))] && !on[n] {
			t.Fatalf("record %d of watched slot %d is not on the watch's list", n, slotOfID(id, len(w.in)))
		}
	}
	if len(w.recs) > w.limit {
		t.Fatalf("a list of %d numbers past its limit %d", len(w.recs), w.limit)
	}
}

// watchedLive counts the live records of w's slots.
func watchedLive(tab *table, w *slotWatch) int {
	n := 0
	tab.each(func(r *record) {
		if w.in[slotOfID(r.id, len(w.in))] {
			n++
		}
	})
	return n
}

// A watch lists every record of its slots once its walk is over, whatever
// happened meanwhile and after: inserts on either side of the walk's
// position, removals, sweeps, index moves, and compaction moving records
// from above the walk to below it.
func TestWatchListsEverySlotRecord(t *testing.T) {
	forSeeds(t, 12, func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 17))
		const slots = 16
		tab := newTable()
		tab.counts = newSlotCounts(slots)
		next := 0
		add := func(exp int64) {
			id := testID(fmt.Sprintf("w%d", next))
			next++
			tab.insert(id, expiringAt(exp))
		}
		removeSome := func() {
			for k := r.IntN(4); k > 0 && tab.live > 0; k-- {
				n := uint32(r.IntN(int(tab.used)))
				if tab.rec(n).id != "" {
					tab.remove(n)
				}
			}
		}
		for i := range 6000 + r.IntN(6000) {
			exp := int64(50)
			if i%7 == 0 {
				exp = 1 << 40
			}
			add(exp)
		}
		w := &slotWatch{move: 1, in: make([]bool, slots), end: tab.used}
		for _, x := range []int{3, 7, 8 + r.IntN(8)} {
			w.in[x] = true
		}
		tab.watches = append(tab.watches, w)
		// The walk, with changes on both sides of its position.
		for !w.ready() {
			switch r.IntN(4) {
			case 0:
				for k := r.IntN(30); k >= 0; k-- {
					add(1 << 40)
				}
			case 1:
				removeSome()
			case 2:
				tab.sweep(10, r.IntN(64))
			}
			w.walk(tab, 1+r.IntN(200))
		}
		checkWatch(t, tab, w)
		// Six in seven expire; compaction then moves records down a few
		// per sweep, some of them watched ones, under more changes.
		now := int64(100)
		for tab.live > int(tab.used)/4 {
			tab.sweep(now, 4000)
		}
		tab.cursor = tab.used
		tab.sweep(now, 1)
		if !tab.compacting {
			t.Fatal("no compaction with most records free")
		}
		moved := 0
		for step := 0; tab.compacting || step < 200; step++ {
			if step > 50_000 {
				t.Fatal("compaction never ends")
			}
			used := tab.used
			switch r.IntN(5) {
			case 0:
				add(1 << 40)
			case 1:
				removeSome()
			default:
				tab.sweep(now, r.IntN(64))
			}
			if tab.used < used {
				moved++
			}
			if step%50 == 0 {
				checkWatch(t, tab, w)
			}
		}
		checkWatch(t, tab, w)
		if moved == 0 {
			t.Fatal("compaction never cut the record space")
		}
	})
}

// A watch whose slots take many new keys after its walk (a move held up
// before its freeze) is dropped once its list outgrows twice its size at
// the walk's end: its move's export then looks at every record.
func TestGrownWatchIsDropped(t *testing.T) {
	const slots = 4
	tab := newTable()
	tab.counts = newSlotCounts(slots)
	for i := range 2000 {
		tab.insert(testID(fmt.Sprintf("s%d", i)), expiringAt(1<<40))
	}
	w := &slotWatch{move: 1, in: []bool{true, false, false, false}, end: tab.used}
	tab.watches = []*slotWatch{w}
	w.walk(tab, int(tab.used))
	checkWatch(t, tab, w)
	if w.limit != 2*watchedLive(tab, w)+watchSlack {
		t.Fatalf("limit %d for %d records", w.limit, watchedLive(tab, w))
	}
	for i := 2000; slices.Contains(tab.watches, w); i++ {
		if len(w.recs) > w.limit {
			t.Fatalf("a list of %d numbers past its limit %d, still watched", len(w.recs), w.limit)
		}
		if i > 100_000 {
			t.Fatal("the watch grew without end")
		}
		tab.insert(testID(fmt.Sprintf("s%d", i)), expiringAt(1<<40))
		id := string(testID(fmt.Sprintf("s%d", i-1500)))
		n, _ := tab.lookup([]byte(id))
		tab.remove(n)
	}
	if len(w.recs) != w.limit+1 {
		t.Fatalf("dropped at %d numbers, limit %d", len(w.recs), w.limit)
	}
}

// An export of frozen slots reads only the watch's records when this
// replica has one, and writes the same bytes as a replica without one
// (and as itself without it), however much of the walk was left to the
// export.
func TestWatchedExportIsTheSame(t *testing.T) {
	for _, walked := range []int{0, 1000, -1} {
		t.Run(fmt.Sprint(walked), func(t *testing.T) {
			a := &group{t: t, s: NewShard(), now: 1_000_000}
			b := &group{t: t, s: NewShard(), now: 1_000_000}
			all := make([]uint32, 64)
			for i := range all {
				all[i] = uint32(i)
			}
			both := func(e []byte) { a.apply(e); b.apply(e) }
			both(EncodeInit(1, 64, all))
			p := hourly(5)
			var checks []Check
			for i := range 20_000 {
				checks = append(checks, Check{Key: fmt.Sprintf("e%d", i), Policy: p, Cost: 1})
			}
			a.now += 1000
			b.now = a.now
			both(EncodeAllow(nil, a.now, checks))
			move, sl := uint64(9), []uint32{5, 17, 40}
			a.s.mu.Lock()
			tab, w, err := a.s.startWatch(move, sl)
			if err != nil {
				a.s.mu.Unlock()
				t.Fatalf("startWatch: %v, %v", w, err)
			}
			if walked < 0 {
				walked = int(w.end)
			}
			w.walk(tab, walked)
			a.s.mu.Unlock()
			// More keys after the watch began, some in its slots.
			checks = checks[:0]
			for i := range 2000 {
				checks = append(checks, Check{Key: fmt.Sprintf("f%d", i), Policy: p, Cost: 1})
			}
			a.now += 1000
			both(EncodeAllow(nil, a.now, checks))
			both(EncodeFreeze(move, sl))
			ea, err := a.s.ExportSlots(move, sl)
			if err != nil {
				t.Fatal(err)
			}
			eb, err := b.s.ExportSlots(move, sl)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ea, eb) {
				t.Fatalf("the watched export differs: %d against %d bytes", len(ea), len(eb))
			}
			if !w.ready() {
				t.Fatal("the export left the watch's walk unfinished")
			}
			a.s.mu.Lock()
			c, err := a.s.captureSlots(move, sl)
			if err == nil {
				c.detach()
			}
			a.s.mu.Unlock()
			if err != nil || !c.sparse || len(c.cand) > 2*(22_000*3/64)+watchSlack {
				t.Fatalf("a capture of the watched slots: %v, sparse %v, %d records to read", err, c.sparse, len(c.cand))
			}
			tab2, _, _, err := decodeShardSnapshot(ea)
			if err != nil {
				t.Fatal(err)
			}
			if tab2.live == 0 {
				t.Fatal("the export holds no state")
			}
		})
	}
}

// A watch is refused for slots the group neither owns nor froze for its
// move, is dropped by its move's drop and by a restore, and a table keeps
// maxWatches at most.
func TestWatchLifetime(t *testing.T) {
	g, _ := orphanGroup(t, 400)
	if err := g.s.WatchSlots(1, []uint32{9}); !errors.Is(err, ErrNotFrozen) {
		t.Fatalf("a watch of a slot out of range: %v", err)
	}
	g.mustApply(EncodeFreeze(1, []uint32{2}))
	if err := g.s.WatchSlots(2, []uint32{2}); !errors.Is(err, ErrNotFrozen) {
		t.Fatalf("a watch of a slot frozen by another move: %v", err)
	}
	if err := g.s.WatchSlots(1, []uint32{2}); err != nil {
		t.Fatal(err)
	}
	if err := g.s.WatchSlots(1, []uint32{2}); err != nil || len(g.s.tab.watches) != 1 {
		t.Fatalf("a second watch of one move: %v, %d watches", err, len(g.s.tab.watches))
	}
	g.mustApply(EncodeDrop(1))
	if len(g.s.tab.watches) != 0 {
		t.Fatal("the move's drop left its watch")
	}
	if err := g.s.WatchSlots(1, []uint32{2}); !errors.Is(err, ErrNotFrozen) {
		t.Fatalf("a watch of a dropped slot: %v", err)
	}
	for m := uint64(10); m < 10+maxWatches+2; m++ {
		if err := g.s.WatchSlots(m, []uint32{uint32(m % 2)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(g.s.tab.watches) != maxWatches || g.s.tab.watches[0].move != 12 {
		t.Fatalf("%d watches, the oldest of move %d", len(g.s.tab.watches), g.s.tab.watches[0].move)
	}
	snap, err := g.s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	data := persist(t, snap)
	if err := g.s.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if len(g.s.tab.watches) != 0 {
		t.Fatal("a restore kept the old table's watches")
	}
	if !slices.Equal(g.s.Ownership().Owned, []uint32{0, 1, 3}) {
		t.Fatalf("owned after the restore: %v", g.s.Ownership().Owned)
	}
}

// A watch filled while entries apply on another goroutine, and an export
// taken while they still do, hold the same states as a replica without a
// watch exporting once everything is applied (run under -race in make
// test).
func TestWatchUnderConcurrentApplies(t *testing.T) {
	const slots = 16
	all := make([]uint32, slots)
	for i := range all {
		all[i] = uint32(i)
	}
	a, b := NewShard(), NewShard()
	var index uint64
	// Every entry carries one timestamp: log time stands still, so the
	// exports' headers agree whenever they are taken.
	ts := int64(1_700_000_000) * sec
	both := func(e []byte) {
		index++
		l := &raft.Log{Index: index, Type: raft.LogCommand, Data: e}
		a.Apply(l)
		b.Apply(l)
	}
	both(EncodeInit(1, slots, all))
	p := hourly(1000)
	next := 0
	keys := func(n int) []Check {
		var cs []Check
		for range n {
			cs = append(cs, Check{Key: fmt.Sprintf("c%d", next), Policy: p, Cost: 1})
			next++
		}
		return cs
	}
	for range 40 {
		both(EncodeAllow(nil, ts, keys(500)))
	}
	move, sl := uint64(3), []uint32{2, 9, 11}
	frozen := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 400 {
			if i == 150 {
				both(EncodeFreeze(move, sl))
				close(frozen)
			}
			both(EncodeAllow(nil, ts, keys(20)))
		}
	}()
	if err := a.WatchSlots(move, sl); err != nil {
		t.Fatal(err)
	}
	<-frozen
	ea, err := a.ExportSlots(move, sl)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	eb, err := b.ExportSlots(move, sl)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ea, eb) {
		t.Fatalf("the export taken under applies, from the watching replica, differs: %d against %d bytes", len(ea), len(eb))
	}
	a.mu.Lock()
	w, sparse := a.tab.watchOf(move), a.sparseExports
	a.mu.Unlock()
	if w == nil || !w.ready() || sparse != 1 {
		t.Fatalf("after the export: watch %v, %d exports read its list", w, sparse)
	}
}

// A watch of an empty group is over at once and has its limit.
func TestWatchOfEmptyGroup(t *testing.T) {
	g := newGroup(t, 1, 4, 0, 1, 2, 3)
	if err := g.s.WatchSlots(1, []uint32{2}); err != nil {
		t.Fatal(err)
	}
	w := g.s.tab.watchOf(1)
	if w == nil || !w.ready() || w.limit != watchSlack {
		t.Fatalf("a watch of an empty group: %+v", w)
	}
}
