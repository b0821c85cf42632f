package fsm

import (
	"hash/maphash"
	"unsafe"

	"github.com/floodgate/floodgate/window"
)

// record is one limit's state for one key: 40 bytes, stored in chunks.
// When the state expires is not stored: it follows from the state and the
// limit's shape, which the identity spells out (see expiry).
type record struct {
	// id is the state identity (see appendID); empty marks a free record.
	id string
	st window.State
}

// expiry is when r's state behaves like a zero state, in log time, from
// the shape its identity gives. Only the limit's value is missing there,
// and with it unknown the expiry can only come out later than the state's
// own: a state judged expired here has truly expired.
func (r *record) expiry() int64 {
	l, ok := shapeOf(r.id)
	if !ok {
		return 0 // cannot happen: identities are written by appendID
	}
	return l.Expiry(&r.st)
}

// recordBytes is a record's own size in its chunk.
const recordBytes = int64(unsafe.Sizeof(record{}))

// heapOf is the heap memory r's state holds (a sliding log's ring, a
// sliding counter's buckets), from the shape its identity gives.
func heapOf(r *record) int64 {
	if r.st.P == nil {
		return 0
	}
	l, ok := shapeOf(r.id)
	if !ok {
		return 0 // cannot happen: identities are written by appendID
	}
	return int64(l.HeapBytes(&r.st))
}

const (
	chunkBits = 10
	chunkSize = 1 << chunkBits
	// minSlots is the smallest index size.
	minSlots = 1024
)

// table maps state identities to records with a small, predictable memory
// footprint: records live in fixed-size chunks (so growth never copies or
// doubles them) and an index (index.go) maps identities to record numbers.
// When the index must grow, shrink or give record numbers another bit,
// the table moves to a new one a few entries per change (regrow.go)
// instead of rebuilding it while applies wait.
//
// Its layout differs between replicas (the hash seed is random per process,
// which also defeats hash flooding) but nothing observable depends on it:
// lookups are by identity and snapshots are sorted by identity.
type table struct {
	seed   maphash.Seed
	chunks [][]record
	// free holds free record numbers below used, and, after compaction
	// cut used, some that are not (compact.go): takeFree skips those.
	free []uint32
	used uint32 // record numbers handed out so far
	live int
	// bytes is what the live records hold (recordBytes each, their
	// identities and their states' buffers): what --max-state-mib
	// bounds. Kept up to date at every insert, removal and change of a
	// state's buffer (Shard.settle, capture.keep).
	bytes int64
	idx   *index // every record inserted since a move began, and the rest once moved
	// old is the index being moved from, nil when none (regrow.go);
	// records numbered below mig are moved.
	old    *index
	mig    uint32
	cursor uint32 // next record number the sweeper looks at
	// compacting is set while compaction moves records down (compact.go).
	compacting bool
	added      uint64 // records inserted so far: what the sweeper keeps pace with
	// caps are the snapshots being captured (raft's, a backup's): records
	// are kept for them before they change (write, remove, insert into a
	// free record) and not moved (compact).
	caps []*capture
	// counts counts records by slot once the group has slots; nil before
	// (and in tables decoded from an export or a backup).
	counts *slotCounts
	// watches list the records of slots about to move (watch.go).
	watches []*slotWatch
}

func newTable() *table {
	return &table{seed: maphash.MakeSeed(), idx: newIndex(minSlots, 0)}
}

// rec returns record n, to read.
func (t *table) rec(n uint32) *record {
	return &t.chunks[n>>chunkBits][n&(chunkSize-1)]
}

// write returns record n, to change: a snapshot being captured keeps it
// first, as it was.
func (t *table) write(n uint32) *record {
	for _, c := range t.caps {
		c.keep(n)
	}
	return t.rec(n)
}

// hash is an identity's hash, which the index probes by.
func (t *table) hash(id string) uint64 { return maphash.String(t.seed, id) }

// lookup returns the record number of id.
func (t *table) lookup(id []byte) (uint32, bool) {
	h := maphash.Bytes(t.seed, id)
	if n, ok := t.idx.find(t, id, h); ok || t.old == nil {
		return n, ok
	}
	return t.old.find(t, id, h)
}

// insert adds id, which must not be present, with state st, and returns
// its record number.
func (t *table) insert(id []byte, st window.State) uint32 {
	if (t.live+1)*4 > len(t.idx.slots)*3 {
		t.regrow(len(t.idx.slots) * 2)
	}
	n, ok, _ := t.takeFree(freeLook)
	if !ok {
		n = t.used
		t.used++
		if int(n>>chunkBits) == len(t.chunks) {
			t.chunks = append(t.chunks, make([]record, chunkSize))
		}
		if n+1 > t.idx.low() {
			t.regrow(len(t.idx.slots)) // record numbers need another bit
		}
	}
	r := t.write(n) // a free record: a capture notes it needs nothing
	*r = record{id: string(id), st: st}
	size := recordSize(r)
	t.bytes += size
	t.idx.put(t.hash(r.id), n)
	if t.counts != nil {
		t.noteAdded(t.counts.added(r.id, size), n)
	}
	t.live++
	t.added++
	t.migrate(migratePerChange)
	return n
}

// resize counts a change of delta bytes in what record r's state's
// buffer holds (a sliding log's ring grown, shrunk or freed).
func (t *table) resize(r *record, delta int) {
	if delta == 0 {
		return
	}
	t.bytes += int64(delta)
	if t.counts != nil {
		t.counts.bytes[t.counts.slotOf(r.id)] += int64(delta)
	}
}

// recordSize is what record r holds: the record, its identity and its
// state's buffer.
func recordSize(r *record) int64 { return recordBytes + int64(len(r.id)) + heapOf(r) }

// remove deletes record n from the index and frees it.
func (t *table) remove(n uint32) {
	r := t.write(n)
	size := recordSize(r)
	t.bytes -= size
	h := t.hash(r.id)
	if i, ok := t.idx.where(h, n); ok {
		t.idx.del(t, i)
	}
	if t.old != nil {
		if i, ok := t.old.where(h, n); ok {
			t.old.del(t, i)
		}
	}
	if t.counts != nil {
		t.counts.removed(r.id, size)
	}
	*r = record{}
	t.free = append(t.free, n)
	t.live--
	// Not while a move is under way: regrow would finish it at once.
	if t.old == nil && len(t.idx.slots) > minSlots && t.live*8 < len(t.idx.slots) {
		t.regrow(len(t.idx.slots) / 2)
	}
	t.migrate(migratePerChange)
}

// sweep looks at up to budget records from the cursor onwards and frees
// those expired at now, and orphans (orphans.go): at least orphanSweep
// records while there are any. Expired records behave like absent ones,
// and orphans are never read, so when they are freed changes memory only,
// never an answer. It also carries on, a few records at a time, an index
// move (regrow.go) and a compaction (compact.go), which it starts when it
// wraps around.
func (t *table) sweep(now int64, budget int) {
	t.migrate(migratePerSweep)
	t.compactStep(max(compactPerSweep, budget/8))
	if t.orphans() > 0 {
		budget = max(budget, t.counts.step)
	}
	for ; budget > 0 && t.used > 0; budget-- {
		if t.cursor >= t.used {
			t.cursor = 0
			t.startCompaction()
			if t.used == 0 {
				return
			}
		}
		n := t.cursor
		t.cursor++
		if r := t.rec(n); r.id != "" && (r.expiry() <= now || t.counts != nil && t.counts.orphan(r.id)) {
			t.remove(n)
		}
	}
}

// each calls fn for every live record, in record-number order.
func (t *table) each(fn func(r *record)) {
	for n := uint32(0); n < t.used; n++ {
		if r := t.rec(n); r.id != "" {
			fn(r)
		}
	}
}
