package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// checkFree checks that every free record below used is in t.free, so
// that inserts and compaction find it.
func checkFree(t *testing.T, tab *table) {
	t.Helper()
	in := map[uint32]bool{}
	for _, n := range tab.free {
		in[n] = true
	}
	for n := uint32(0); n < tab.used; n++ {
		if tab.rec(n).id == "" && !in[n] {
			t.Fatalf("free record %d of %d is not in the free list", n, tab.used)
		}
	}
	if want := int((tab.used + chunkSize - 1) >> chunkBits); len(tab.chunks) != want {
		t.Fatalf("%d chunks for %d record numbers", len(tab.chunks), tab.used)
	}
}

// Compaction a few records per sweep, under random inserts, removals,
// sweeps and index moves: every lookup agrees with a map reference, every
// free record stays findable, and it ends with the record space as small
// as the live records.
func TestTableCompactsUnderChanges(t *testing.T) {
	forSeeds(t, 12, func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 13))
		tab := newTable()
		ref := map[string]int64{}
		next := 0
		add := func(exp int64) {
			id := testID(fmt.Sprintf("c%d", next))
			next++
			tab.insert(id, expiringAt(exp))
			ref[string(id)] = exp
		}
		for i := range 12_000 {
			exp := int64(50)
			if i%7 == 0 {
				exp = 1 << 40
			}
			add(exp)
		}
		now := int64(100) // six in seven have expired
		for tab.live > 12_000/7+1 {
			tab.sweep(now, 4000)
		}
		for k, exp := range ref {
			if exp <= now {
				delete(ref, k)
			}
		}
		tab.cursor = tab.used // the next sweep wraps
		tab.sweep(now, 1)
		if !tab.compacting {
			t.Fatal("no compaction with six records in seven free")
		}
		checkTable(t, tab, ref)
		for step := 0; tab.compacting; step++ {
			if step > 20_000 {
				t.Fatal("compaction never ends")
			}
			switch op := r.IntN(10); {
			case op < 3:
				add(1 << 40)
			case op < 5:
				for k := range ref {
					n, _ := tab.lookup([]byte(k))
					tab.remove(n)
					delete(ref, k)
					break
				}
			case op < 6:
				if r.IntN(20) == 0 {
					tab.regrow(len(tab.idx.slots))
				}
			default:
				tab.sweep(now, r.IntN(50))
			}
			checkIndex(t, tab)
			if step%25 == 0 {
				checkTable(t, tab, ref)
				checkFree(t, tab)
			}
		}
		checkIndex(t, tab)
		checkTable(t, tab, ref)
		checkFree(t, tab)
		if int(tab.used) != tab.live {
			t.Fatalf("compaction ended with %d record numbers for %d live records", tab.used, tab.live)
		}
	})
}

// No insert, removal or sweep does work proportional to the table: while
// 95% or 99.9% of the records expire (spread out, or the newest, a burst
// gone idle), are swept, and the record space and index shrink, each step
// moves at most its share of an index move (migratePerChange or
// migratePerSweep live records, 64 record numbers each) and cuts and
// skips at most 64 numbers per compaction move it may make.
func TestTableStepsAreBounded(t *testing.T) {
	const n = 200_000
	for _, c := range []struct {
		tail  bool
		every int
	}{{false, 20}, {true, 20}, {false, 1000}} {
		tail := c.tail
		tab := newTable()
		for i := range n {
			exp := int64(50)
			if tail && i < n/c.every || !tail && i%c.every == 0 {
				exp = 1 << 40
			}
			tab.insert(testID(fmt.Sprintf("b%d", i)), expiringAt(exp))
		}
		tab.settle()
		moves, compactions := 0, 0
		for sweeps := 0; tab.live > n/c.every || tab.compacting || tab.old != nil || int(tab.used) > tab.live; sweeps++ {
			if sweeps > 1_000_000 {
				t.Fatal("the table never settles")
			}
			old, mig, used, free, compacting := tab.old, tab.mig, tab.used, len(tab.free), tab.compacting
			budget := 64
			tab.sweep(100, budget)
			// A sweep's removals each move migratePerChange records, and
			// it moves migratePerSweep itself.
			most := uint32((migratePerSweep + budget*migratePerChange) * 64)
			switch {
			case old != nil && tab.old == old && tab.mig-mig > most:
				t.Fatalf("tail %v: a sweep moved %d record numbers of the index", tail, tab.mig-mig)
			case old != nil && tab.old != old && used-mig > most:
				t.Fatalf("tail %v: a sweep finished an index move with %d record numbers to go", tail, used-mig)
			}
			if old == nil && tab.old != nil {
				moves++
			}
			if compacting {
				compactions++
				if cut := int(used) - int(tab.used); cut > compactPerSweep*64 {
					t.Fatalf("tail %v: a sweep cut %d record numbers", tail, cut)
				}
				if popped := free + budget - len(tab.free); popped > compactPerSweep*64+budget { // budget: what its removals freed
					t.Fatalf("tail %v: a sweep took %d numbers off the free list", tail, popped)
				}
			}
		}
		if moves == 0 || compactions == 0 {
			t.Fatalf("tail %v: %d index moves, %d sweeps compacting: the test needs both", tail, moves, compactions)
		}
	}
}
