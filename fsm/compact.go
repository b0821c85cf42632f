package fsm

// compactPerSweep is how many records compaction moves per sweep at
// least (more for a tick's larger sweep). Compacting every record at
// once, when the sweeper wrapped, held the lock 310-351 ms with 500,000
// live of 2,000,000 record numbers; now the slowest sweep while those
// expire, are freed and compacted and the index shrinks takes 3.5-4.6 ms
// (one run in five 20 ms), most of it the growth of the free list and
// the new index's allocation (BenchmarkCompaction).
const compactPerSweep = 256

// startCompaction starts moving records from the top of the record space
// into free records below, once most of the space is free, so that whole
// chunks at the top can be dropped. It starts when the sweeper wraps
// around, and the moves happen a few per sweep (compactStep).
func (t *table) startCompaction() {
	if t.used >= 4*chunkSize && t.live*4 <= int(t.used) {
		t.compacting = true
	}
}

// compactStep moves up to k records. It frees the top record number
// whenever the top record is free, dropping a chunk when its last record
// goes, and moves the top record to a free one below when it is live. It
// is over once no free record is left below the top: the record space is
// as small as the live records. Cutting a free number and skipping a
// stale one in t.free cost a 64th of a move each, so a long free tail
// (a burst of new keys gone idle) is cut over many sweeps too. It waits
// while a snapshot is captured (record numbers are its bookmarks).
func (t *table) compactStep(k int) {
	for work := k * 64; t.compacting && len(t.caps) == 0 && work > 0; {
		if t.used == 0 {
			t.compacted()
			return
		}
		top := t.used - 1
		if t.rec(top).id == "" {
			t.cut()
			work--
			continue
		}
		n, ok, looked := t.takeFree(work)
		work -= looked
		if !ok {
			if len(t.free) == 0 {
				t.compacted()
			}
			return
		}
		t.move(top, n)
		t.cut()
		work -= 63 // and the number taken: a move in all
	}
}

// cut drops the top record number, which is free, and the top chunk once
// it holds none. Its number may still be in t.free: takeFree skips it.
func (t *table) cut() {
	t.used--
	if keep := int((t.used + chunkSize - 1) >> chunkBits); keep < len(t.chunks) {
		t.chunks[keep] = nil
		t.chunks = t.chunks[:keep]
	}
}

// compacted ends compaction. Smaller record numbers leave tags more bits:
// the index moves to one that gives them, unless it is moving already
// (regrow, which would finish that move at once; the next move gives
// them).
func (t *table) compacted() {
	t.compacting = false
	if t.old == nil && shiftFor(t.used) < t.idx.shift {
		t.regrow(len(t.idx.slots))
	}
}

// freeLook is how many numbers of t.free an insert looks at for a free
// record: after compaction cut a long tail, the numbers it cut may lie
// at the top of t.free, and an insert that finds none appends instead.
const freeLook = 64

// takeFree returns a free record number below t.used, looking at up to
// look numbers of t.free, and how many it looked at. Numbers compaction
// cut are skipped, and so are numbers in t.free twice (cut, then handed
// out again at the top and freed again).
func (t *table) takeFree(look int) (n uint32, ok bool, looked int) {
	for k := len(t.free); k > 0 && looked < look; k-- {
		n = t.free[k-1]
		t.free = t.free[:k-1]
		looked++
		if n < t.used && t.rec(n).id == "" {
			return n, true, looked
		}
	}
	return 0, false, looked
}

// move relocates record from to the free record to, fixing the indexes.
// During an index move (regrow.go) a record moved below the move's
// position must be in the new index.
func (t *table) move(from, to uint32) {
	h := t.hash(t.rec(from).id)
	if i, ok := t.idx.where(h, from); ok {
		t.idx.slots[i] = t.idx.entry(h, to)
	}
	if t.old != nil {
		if i, ok := t.old.where(h, from); ok {
			t.old.slots[i] = t.old.entry(h, to)
		}
		if to < t.mig {
			t.idx.ensure(h, to)
		}
	}
	*t.rec(to) = *t.rec(from)
	*t.rec(from) = record{}
	if len(t.watches) > 0 { // a table with watches counts its slots (startWatch)
		t.noteAdded(t.counts.slotOf(t.rec(to).id), to)
	}
}
