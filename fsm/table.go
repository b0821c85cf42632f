package fsm

import (
	"hash/maphash"
	"math/bits"

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

const (
	chunkBits = 10
	chunkSize = 1 << chunkBits
	// minSlots is the smallest index size.
	minSlots = 1024
)

// table maps state identities to records with a small, predictable memory
// footprint: records live in fixed-size chunks (so growth never copies or
// doubles them) and the index is open addressing over uint32 record numbers
// (4 bytes a slot, load factor at most 3/4), with linear probing and
// backward-shift deletion, so there are no tombstones.
//
// A slot's bits above those its record numbers need hold a tag: the top
// bits of the identity's hash. A probe compares tags first and reads a
// record (its identity is in another cache line, its bytes in a third)
// only when they match, so a lookup reads about one record instead of
// every record of its probe run, and a miss usually none.
//
// Its layout differs between replicas (the hash seed is random per process,
// which also defeats hash flooding) but nothing observable depends on it:
// lookups are by identity and snapshots are sorted by identity.
type table struct {
	seed   maphash.Seed
	chunks [][]record
	free   []uint32 // free record numbers below used
	used   uint32   // record numbers handed out so far
	live   int
	slots  []uint32 // 0 = empty, otherwise tag | record number + 1
	shift  uint     // bits of a slot that hold record number + 1; the rest, the tag
	cursor uint32   // next record number the sweeper looks at
	added  uint64   // records inserted so far: what the sweeper keeps pace with
	// caps are the snapshots being captured (raft's, a backup's): records
	// are kept for them before they change (write, remove, insert into a
	// free record) and not moved (compact).
	caps []*capture
	// counts counts records by slot once the group has slots; nil before
	// (and in tables decoded from an export or a backup).
	counts *slotCounts
}

func newTable() *table {
	t := &table{seed: maphash.MakeSeed()}
	t.resize(minSlots)
	return t
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

func (t *table) mask() uint64 { return uint64(len(t.slots) - 1) }

// lookup returns the record number of id.
func (t *table) lookup(id []byte) (uint32, bool) {
	m, h := t.mask(), maphash.Bytes(t.seed, id)
	tag, low := t.tag(h), t.low()
	for i := h & m; ; i = (i + 1) & m {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if s&^low == tag && t.rec(s&low-1).id == string(id) {
			return s&low - 1, true
		}
	}
}

// low masks the bits of a slot that hold record number + 1.
func (t *table) low() uint32 { return uint32(1)<<t.shift - 1 }

// tag is the slot tag of hash h: its top bits, above t.shift.
func (t *table) tag(h uint64) uint32 { return uint32(h>>32) &^ t.low() }

// slot is what the index holds for record n of hash h.
func (t *table) slot(h uint64, n uint32) uint32 { return t.tag(h) | (n + 1) }

// at finds the index position that holds record n.
func (t *table) at(n uint32) uint64 {
	m, low := t.mask(), t.low()
	i := t.home(t.rec(n).id)
	for t.slots[i]&low != n+1 {
		i = (i + 1) & m
	}
	return i
}

// insert adds id, which must not be present, and returns its record number.
func (t *table) insert(id []byte) uint32 {
	if (t.live+1)*4 > len(t.slots)*3 {
		t.resize(len(t.slots) * 2)
	}
	var n uint32
	if k := len(t.free); k > 0 {
		n = t.free[k-1]
		t.free = t.free[:k-1]
	} else {
		n = t.used
		t.used++
		if int(n>>chunkBits) == len(t.chunks) {
			t.chunks = append(t.chunks, make([]record, chunkSize))
		}
		if n+1 > t.low() {
			t.resize(len(t.slots)) // record numbers need another bit
		}
	}
	r := t.write(n) // a free record: a capture notes it needs nothing
	*r = record{id: string(id)}
	t.place(n)
	if t.counts != nil {
		t.counts.added(r.id)
	}
	t.live++
	t.added++
	return n
}

// place puts record n in the index.
func (t *table) place(n uint32) {
	m := t.mask()
	h := maphash.String(t.seed, t.rec(n).id)
	i := h & m
	for t.slots[i] != 0 {
		i = (i + 1) & m
	}
	t.slots[i] = t.slot(h, n)
}

func (t *table) home(id string) uint64 {
	return maphash.String(t.seed, id) & t.mask()
}

// remove deletes record n from the index and frees it.
func (t *table) remove(n uint32) {
	m, low := t.mask(), t.low()
	t.write(n)
	i := t.at(n)
	// Backward-shift: pull later entries of the probe run into the hole
	// unless their home lies cyclically in (hole, j].
	for j := (i + 1) & m; t.slots[j] != 0; j = (j + 1) & m {
		k := t.home(t.rec(t.slots[j]&low - 1).id)
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	t.slots[i] = 0
	if t.counts != nil {
		t.counts.removed(t.rec(n).id)
	}
	*t.rec(n) = record{}
	t.free = append(t.free, n)
	t.live--
	if len(t.slots) > minSlots && t.live*8 < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
}

// resize rebuilds the index with size slots (a power of two), its record
// numbers given one bit more than they need (so inserts rarely rebuild it
// for a bit) and at least 16 bits, the rest of the 32 to tags.
func (t *table) resize(size int) {
	t.shift = shiftFor(t.used)
	t.slots = make([]uint32, size)
	for n := uint32(0); n < t.used; n++ {
		if t.rec(n).id != "" {
			t.place(n)
		}
	}
}

// shiftFor is the record bits of an index over used record numbers.
func shiftFor(used uint32) uint { return min(32, max(16, uint(bits.Len32(used))+1)) }

// sweep looks at up to budget records from the cursor onwards and frees
// those expired at now, and orphans (orphans.go): at least orphanSweep
// records while there are any. Expired records behave like absent ones,
// and orphans are never read, so when they are freed changes memory only,
// never an answer.
func (t *table) sweep(now int64, budget int) {
	if t.orphans() > 0 {
		budget = max(budget, t.counts.step)
	}
	for ; budget > 0 && t.used > 0; budget-- {
		if t.cursor >= t.used {
			t.cursor = 0
			t.compact()
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

// compact moves records from the top of the record space into free slots
// below, then drops empty chunks, once most of the space is free. It runs
// when the sweeper wraps around, so records are not moved under its feet,
// and not while a snapshot is captured (record numbers are its bookmarks).
func (t *table) compact() {
	if t.used < 4*chunkSize || t.live*4 > int(t.used) || len(t.caps) > 0 {
		return
	}
	free := make(map[uint32]bool, len(t.free))
	for _, n := range t.free {
		free[n] = true
	}
	lo, hi := uint32(0), t.used
	for {
		for lo < hi && !free[lo] {
			lo++
		}
		for hi > lo && t.rec(hi-1).id == "" {
			hi--
		}
		if lo >= hi {
			break
		}
		t.move(hi-1, lo)
		free[lo] = false
		hi--
		lo++
	}
	for hi > 0 && t.rec(hi-1).id == "" {
		hi--
	}
	t.used = hi
	t.free = t.free[:0]
	for n := uint32(0); n < t.used; n++ {
		if t.rec(n).id == "" {
			t.free = append(t.free, n)
		}
	}
	keep := int((t.used + chunkSize - 1) >> chunkBits)
	for i := keep; i < len(t.chunks); i++ {
		t.chunks[i] = nil
	}
	t.chunks = t.chunks[:keep]
	if shiftFor(t.used) < t.shift {
		t.resize(len(t.slots)) // smaller record numbers leave tags more bits
	}
}

// move relocates record from to the free record to, fixing the index.
func (t *table) move(from, to uint32) {
	i := t.at(from)
	t.slots[i] = t.slots[i]&^t.low() | (to + 1)
	*t.rec(to) = *t.rec(from)
	*t.rec(from) = record{}
}

// each calls fn for every live record, in record-number order.
func (t *table) each(fn func(r *record)) {
	for n := uint32(0); n < t.used; n++ {
		if r := t.rec(n); r.id != "" {
			fn(r)
		}
	}
}
