package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/floodgate/floodgate/test/proptest"
	"github.com/floodgate/floodgate/window"
)

// testShape is the limit every test identity belongs to: a fixed window,
// whose state {A: end, B: count} expires at A.
var testShape = window.Limit{Algorithm: window.FixedWindow, Limit: 10, Window: 1000}

func testID(k string) []byte { return appendID(nil, []byte(k), "", &testShape) }

func expiringAt(exp int64) window.State { return window.State{A: exp, B: 1} }

// The table against a map, the brute-force reference: random inserts,
// removals and sweeps, with every key checked after each step batch.
func TestTableMatchesMap(t *testing.T) {
	for seed := uint64(1); seed <= uint64(proptest.Runs(20)); seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		tab := newTable()
		ref := map[string]int64{} // id → exp
		universe := 200 + r.IntN(5000)
		now := int64(0)
		for step := 0; step < 20000; step++ {
			id := string(testID(fmt.Sprintf("key-%d", r.IntN(universe))))
			switch op := r.IntN(10); {
			case op < 6: // insert or touch
				n, ok := tab.lookup([]byte(id))
				if _, want := ref[id]; ok != want {
					t.Fatalf("seed %d step %d: lookup(%s) = %v, reference says %v", seed, step, id, ok, want)
				}
				if !ok {
					n = tab.insert([]byte(id), window.State{})
				}
				exp := now + 1 + int64(r.IntN(1000))
				tab.rec(n).st = expiringAt(exp)
				ref[id] = exp
			case op < 8: // remove
				if n, ok := tab.lookup([]byte(id)); ok {
					tab.remove(n)
					delete(ref, id)
				}
			default: // time passes; sweep part of the table
				now += int64(r.IntN(300))
				tab.sweep(now, r.IntN(3000))
				for k, exp := range ref {
					if _, ok := tab.lookup([]byte(k)); !ok {
						if exp > now {
							t.Fatalf("seed %d step %d: sweep removed %s expiring at %d, now %d", seed, step, k, exp, now)
						}
						delete(ref, k)
					}
				}
			}
			if step%997 == 0 || step == 19999 {
				checkTable(t, tab, ref)
			}
		}
		// Sweeping everything away empties the table and compacts it.
		tab.sweep(now+10_000, int(tab.used)*3+10)
		tab.sweep(now+10_000, int(tab.used)*3+10)
		if tab.live != 0 {
			t.Fatalf("seed %d: %d records left after a full sweep", seed, tab.live)
		}
		if len(tab.idx.slots) != minSlots {
			t.Fatalf("seed %d: index of %d slots after emptying, want it shrunk to %d", seed, len(tab.idx.slots), minSlots)
		}
	}
}

func checkTable(t *testing.T, tab *table, ref map[string]int64) {
	t.Helper()
	if tab.live != len(ref) {
		t.Fatalf("table holds %d records, reference %d", tab.live, len(ref))
	}
	for k, exp := range ref {
		n, ok := tab.lookup([]byte(k))
		if !ok || tab.rec(n).id != k || tab.rec(n).expiry() != exp {
			t.Fatalf("lookup(%s) = %v, %v", k, ok, tab.rec(n))
		}
	}
	seen := 0
	tab.each(func(r *record) {
		if _, ok := ref[r.id]; !ok {
			t.Fatalf("table iterates %s, which the reference lacks", r.id)
		}
		seen++
	})
	if seen != len(ref) {
		t.Fatalf("each visited %d, want %d", seen, len(ref))
	}
}

// Compaction moves records to the bottom of the record space and frees
// whole chunks, without losing or breaking any record.
func TestTableCompaction(t *testing.T) {
	tab := newTable()
	const n = 20 * chunkSize
	for i := 0; i < n; i++ {
		rn := tab.insert(testID(fmt.Sprintf("k%d", i)), window.State{})
		tab.rec(rn).st = expiringAt(int64(1 + i%10)) // one in ten lives on
		if i%10 == 9 {
			tab.rec(rn).st = expiringAt(1 << 40)
		}
	}
	tab.sweep(100, n) // removes 90%
	tab.sweep(100, 1) // wraps: compaction starts
	if !tab.compacting {
		t.Fatal("no compaction with 90% of the records free")
	}
	// It moves compactPerSweep records per sweep, each a record from the
	// top into a free one below, and lookups work throughout.
	steps := 0
	for ; tab.compacting; steps++ {
		tab.sweep(100, 1)
		if _, ok := tab.lookup(testID(fmt.Sprintf("k%d", 10*steps%n+9))); !ok {
			t.Fatalf("k%d lost during compaction", 10*steps%n+9)
		}
	}
	if steps < n/10/compactPerSweep {
		t.Fatalf("compaction of %d records in %d sweeps", n/10, steps)
	}
	if tab.live != n/10 {
		t.Fatalf("%d live, want %d", tab.live, n/10)
	}
	if int(tab.used) != tab.live || len(tab.chunks) != (tab.live+chunkSize-1)/chunkSize {
		t.Fatalf("after compaction used=%d chunks=%d for %d live records", tab.used, len(tab.chunks), tab.live)
	}
	for i := 9; i < n; i += 10 {
		if _, ok := tab.lookup(testID(fmt.Sprintf("k%d", i))); !ok {
			t.Fatalf("k%d lost in compaction", i)
		}
	}
}

// Record numbers and tags share a slot's 32 bits: as the record space grows
// the index gives numbers more bits (tags fewer) when it grows, and as it
// shrinks again after a sweep and compaction, fewer; every lookup agrees
// with the map reference throughout, and tags stay in use.
func TestTableTagsAcrossRecordBits(t *testing.T) {
	tab := newTable()
	ref := map[string]int64{}
	const n = 150_000
	shifts := map[uint]bool{}
	for i := 0; i < n; i++ {
		id := testID(fmt.Sprintf("k%d", i))
		rn := tab.insert(id, window.State{})
		exp := int64(1 + i%8) // one in eight lives on
		if i%8 == 7 {
			exp = 1 << 40
		}
		tab.rec(rn).st = expiringAt(exp)
		ref[string(id)] = exp
		shifts[tab.idx.shift] = true
		if i%3 == 0 && i > 0 { // remove an earlier one now and then
			old := string(testID(fmt.Sprintf("k%d", i-1)))
			if m, ok := tab.lookup([]byte(old)); ok {
				tab.remove(m)
				delete(ref, old)
			}
		}
	}
	if !shifts[16] || !shifts[17] || !shifts[18] {
		t.Fatalf("record bits seen while growing: %v, want 16, 17 and 18", shifts)
	}
	checkTable(t, tab, ref)
	tab.settle() // every entry in one index
	tagged := 0
	for _, s := range tab.idx.slots {
		if s&^tab.idx.low() != 0 {
			tagged++
		}
	}
	if tagged < tab.live/2 {
		t.Fatalf("%d of %d slots carry a tag", tagged, tab.live)
	}
	// Sweep the expired seven eighths away: compaction shrinks the record
	// space and the index, and with them the record bits.
	tab.sweep(100, int(tab.used)+1)
	for tab.sweep(100, 1); tab.compacting; {
		tab.sweep(100, 1)
	}
	for k, exp := range ref {
		if exp <= 100 {
			delete(ref, k)
		}
	}
	checkTable(t, tab, ref)
	if tab.idx.shift != 16 {
		t.Fatalf("record bits %d after compaction to %d records, want 16", tab.idx.shift, tab.used)
	}
	for k := range ref {
		if m, ok := tab.lookup([]byte(k)); ok {
			tab.remove(m)
			delete(ref, k)
		}
		if len(ref) == n/32 {
			break
		}
	}
	checkTable(t, tab, ref)
	if _, ok := tab.lookup(testID("never")); ok {
		t.Fatal("found an identity never inserted")
	}
}

// An index large enough never to grow still gives record numbers another
// bit when they need one: inserts past 2^16-1 records rebuild it in place.
func TestTableRecordBitsGrowInPlace(t *testing.T) {
	tab := newTable()
	tab.regrow(1 << 18) // room for 196,608 records before a load-factor resize
	ref := map[string]int64{}
	for i := 0; i < 70_000; i++ {
		id := testID(fmt.Sprintf("k%d", i))
		tab.insert(id, expiringAt(1<<40))
		ref[string(id)] = 1 << 40
		if tab.used < 1<<16 && tab.idx.shift != 16 {
			t.Fatalf("%d records: %d record bits, want 16", tab.used, tab.idx.shift)
		}
	}
	if tab.idx.shift != 18 || len(tab.idx.slots) != 1<<18 {
		t.Fatalf("70,000 records: %d record bits in %d slots, want 18 in %d", tab.idx.shift, len(tab.idx.slots), 1<<18)
	}
	checkTable(t, tab, ref)
}

// recountBytes is what s's table must count in bytes: every live record
// counted anew.
func recountBytes(s *Shard) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	s.tab.each(func(r *record) { n += recordBytes + int64(len(r.id)) + heapOf(r) })
	return n
}

// slotBytesDrift says where s's bytes by slot differ from its records
// counted anew, or "" (also without slots).
func slotBytesDrift(s *Shard) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.tab.counts
	if c == nil {
		return ""
	}
	want := make([]int64, len(c.bytes))
	s.tab.each(func(r *record) { want[c.slotOf(r.id)] += recordBytes + int64(len(r.id)) + heapOf(r) })
	for x := range want {
		if want[x] != c.bytes[x] {
			return fmt.Sprintf("slot %d: counted %d bytes, its records hold %d", x, c.bytes[x], want[x])
		}
	}
	return ""
}
