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
			tab.rec(tab.insert(id)).st = expiringAt(exp)
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
