package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/floodgate/floodgate/window"
)

// checkIndex checks a table's indexes: every live record is in the new
// index or the old one, at most once in each; every live record numbered
// below the move's position is in the new one; and entries refer to live
// records only.
func checkIndex(t *testing.T, tab *table) {
	t.Helper()
	count := func(x *index) map[uint32]int {
		in := map[uint32]int{}
		for _, s := range x.slots {
			if s != 0 {
				in[s&x.low()-1]++
			}
		}
		return in
	}
	inIdx, inOld := count(tab.idx), map[uint32]int{}
	if tab.old != nil {
		inOld = count(tab.old)
	}
	live := 0
	for n := uint32(0); n < tab.used; n++ {
		if tab.rec(n).id == "" {
			if inIdx[n]+inOld[n] != 0 {
				t.Fatalf("free record %d is indexed", n)
			}
			continue
		}
		live++
		if inIdx[n] > 1 || inOld[n] > 1 || inIdx[n]+inOld[n] == 0 {
			t.Fatalf("record %d: %d times in the new index, %d in the old", n, inIdx[n], inOld[n])
		}
		if tab.old != nil && n < tab.mig && inIdx[n] == 0 {
			t.Fatalf("record %d, below the move's position %d, is not in the new index", n, tab.mig)
		}
	}
	if live != tab.live {
		t.Fatalf("%d live records, table says %d", live, tab.live)
	}
}

// A table moving to a new index (growing, shrinking, or giving record
// numbers another bit) agrees with a map reference at every step, under
// random inserts, removals and sweeps, while its moves run a few
// positions per change; full indexes (three quarters) and long probe runs
// that wrap around the end make removals shift entries back across the
// move's position and over the index's end.
func TestTableMovesIndexInSteps(t *testing.T) {
	forSeeds(t, 12, func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 5))
		tab := newTable()
		ref := map[string]int64{}
		universe := 700 + r.IntN(4000)
		moves, now := 0, int64(0)
		for step := range 30_000 {
			id := string(testID(fmt.Sprintf("key-%d", r.IntN(universe))))
			moving, prev := tab.old != nil, tab.old
			switch op := r.IntN(200); {
			case op < 110:
				n, ok := tab.lookup([]byte(id))
				if _, want := ref[id]; ok != want {
					t.Fatalf("step %d: lookup = %v, reference %v (moving %v)", step, ok, want, moving)
				}
				if !ok {
					n = tab.insert([]byte(id), window.State{})
				}
				exp := now + 1 + int64(r.IntN(2000))
				tab.rec(n).st = expiringAt(exp)
				ref[id] = exp
			case op < 180:
				if n, ok := tab.lookup([]byte(id)); ok {
					tab.remove(n)
					delete(ref, id)
				}
			case op < 199:
				now += int64(r.IntN(200))
				tab.sweep(now, r.IntN(200))
				for k, exp := range ref {
					if exp <= now {
						if _, ok := tab.lookup([]byte(k)); !ok {
							delete(ref, k)
						}
					}
				}
			default: // a move started at an arbitrary moment
				size := len(tab.idx.slots)
				if tab.live*4 < size && size > minSlots && r.IntN(2) == 0 {
					size /= 2
				} else if (tab.live+1)*2 < size*3/2 {
					size *= 2
				}
				tab.regrow(size)
			}
			if tab.old != nil && tab.old != prev {
				moves++
			}
			if step%50 == 0 || moving && r.IntN(20) == 0 {
				checkIndex(t, tab)
				checkTable(t, tab, ref)
			}
		}
		tab.settle()
		checkIndex(t, tab)
		checkTable(t, tab, ref)
		if moves < 20 {
			t.Fatalf("only %d index moves", moves)
		}
	})
}

// A move is over after a bounded number of changes: growth from three
// quarters full to twice the size, at migratePerChange positions per
// insert, ends after an eighth of the old size of inserts, long before
// the next growth, so a table never holds two indexes for long.
func TestTableMoveEnds(t *testing.T) {
	tab := newTable()
	for i := range 100_000 {
		// Grown at 3/8 of the new size, moved after 1/16 more.
		if tab.old != nil && tab.live*16 > len(tab.idx.slots)*7+16 {
			t.Fatalf("%d records: a move still under way at %d slots", tab.live, len(tab.idx.slots))
		}
		tab.insert(testID(fmt.Sprintf("k%d", i)), window.State{})
	}
	checkIndex(t, tab)
}

// Removals and inserts during a move from a full index (three quarters:
// long probe runs, some wrapping around its end), of records on both
// sides of the move's position, and inserts that reuse their numbers:
// every record stays in exactly the index it should be in.
func TestTableMoveUnderChanges(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 9))
		tab := newTable()
		ref := map[string]int64{}
		for i := range 760 { // 1024 slots
			id := testID(fmt.Sprintf("s%d-%d", seed, i))
			tab.insert(id, expiringAt(1<<40))
			ref[string(id)] = 1 << 40
		}
		tab.regrow(2048)
		old := tab.old
		next := 760
		for tab.old == old {
			n := uint32(r.IntN(int(tab.used)))
			if r.IntN(2) == 0 { // a record the move has yet to reach
				n = tab.mig + uint32(r.IntN(int(tab.used-tab.mig)))
			}
			switch id := tab.rec(n).id; {
			case id != "" && r.IntN(3) > 0:
				tab.remove(n)
				delete(ref, id)
			default:
				id := testID(fmt.Sprintf("s%d-%d", seed, next))
				next++
				tab.insert(id, expiringAt(1<<40))
				ref[string(id)] = 1 << 40
			}
			checkIndex(t, tab)
			if r.IntN(10) == 0 {
				checkTable(t, tab, ref)
			}
		}
		checkIndex(t, tab)
		checkTable(t, tab, ref)
	}
}
