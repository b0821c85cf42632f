package fsm

// migratePerChange is how many live records each insert or removal moves
// to the new index while the table moves to one. An index grows at three
// quarters full to twice its size, so its successor fills for a quarter
// of the old size's inserts before it would grow again; at 8 records per
// change the move is over after an eighth of that. Shrinking (at an
// eighth full, to half) waits for a move under way to end. Rebuilding the
// index at once held the lock 58 ms at 786,000 states and 150 ms at
// 1,570,000 (BenchmarkTableGrowth).
const migratePerChange = 8

// migratePerSweep is how many live records each sweep moves, so that a
// move ends in a table that only reads and sweeps.
const migratePerSweep = 64

// regrow starts moving the table to a new index of size slots, whose
// record numbers get the bits t.used needs. Records inserted from then on
// go to the new index; the others move in record-number order, a few per
// change (migrate), which reads records as a rebuild did, in memory order;
// lookups look in both until the move is over. A move still under way is
// finished first.
func (t *table) regrow(size int) {
	t.settle()
	old := t.idx
	t.idx = newIndex(size, t.used)
	if t.live > 0 {
		t.old, t.mig = old, 0
	}
}

// migrate moves up to k live records from t.mig on to the new index,
// looking at k·64 record numbers at most: every live record below t.mig
// is in it. A free record costs a read in memory order, a live one a hash
// and a probe, so a record space mostly free (after an expiry, before
// compaction) is passed about as fast as a full one. Records inserted
// since the move began are in the new index already, hence ensure.
func (t *table) migrate(k int) {
	if t.old == nil {
		return
	}
	for look := k * 64; k > 0 && look > 0 && t.mig < t.used; look-- {
		if r := t.rec(t.mig); r.id != "" {
			t.idx.ensure(t.hash(r.id), t.mig)
			k--
		}
		t.mig++
	}
	if t.mig >= t.used {
		t.old = nil
	}
}

// settle finishes a move under way.
func (t *table) settle() {
	if t.old != nil {
		t.migrate(int(t.used-t.mig) + 1)
	}
}
