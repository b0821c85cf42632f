package fsm

import "math/bits"

// index is a table's index: open addressing over uint32 record numbers (4
// bytes a slot, load factor at most 3/4), with linear probing and
// backward-shift deletion, so there are no tombstones.
//
// A slot's bits above those its record numbers need hold a tag: the top
// bits of the identity's hash. A probe compares tags first and reads a
// record (its identity is in another cache line, its bytes in a third)
// only when they match, so a lookup reads about one record instead of
// every record of its probe run, and a miss usually none.
//
// An index does not hash: callers pass an identity's hash (table.hash),
// and it reads records only to compare identities and find the homes of
// the entries a deletion moves.
type index struct {
	slots []uint32 // 0 = empty, otherwise tag | record number + 1
	shift uint     // bits of a slot that hold record number + 1; the rest, the tag
}

// newIndex returns an empty index of size slots (a power of two) whose
// record numbers get the bits used record numbers need, plus one (so
// inserts rarely rebuild it for a bit), and at least 16, the rest of the
// 32 to tags.
func newIndex(size int, used uint32) *index {
	return &index{slots: make([]uint32, size), shift: shiftFor(used)}
}

// shiftFor is the record bits of an index over used record numbers.
func shiftFor(used uint32) uint { return min(32, max(16, uint(bits.Len32(used))+1)) }

func (x *index) mask() uint64 { return uint64(len(x.slots) - 1) }

// low masks the bits of a slot that hold record number + 1.
func (x *index) low() uint32 { return uint32(1)<<x.shift - 1 }

// tag is the slot tag of hash h: its top bits, above shift.
func (x *index) tag(h uint64) uint32 { return uint32(h>>32) &^ x.low() }

// entry is what the index holds for record n of hash h.
func (x *index) entry(h uint64, n uint32) uint32 { return x.tag(h) | (n + 1) }

// find returns the record number of id, of hash h, reading t's records.
func (x *index) find(t *table, id []byte, h uint64) (uint32, bool) {
	m, tag, low := x.mask(), x.tag(h), x.low()
	for i := h & m; ; i = (i + 1) & m {
		s := x.slots[i]
		if s == 0 {
			return 0, false
		}
		if s&^low == tag && t.rec(s&low-1).id == string(id) {
			return s&low - 1, true
		}
	}
}

// where returns the position that holds record n, of hash h, if any.
func (x *index) where(h uint64, n uint32) (uint64, bool) {
	m, e := x.mask(), x.entry(h, n)
	for i := h & m; ; i = (i + 1) & m {
		switch x.slots[i] {
		case 0:
			return 0, false
		case e:
			return i, true
		}
	}
}

// put adds record n of hash h, which must not be there.
func (x *index) put(h uint64, n uint32) {
	m := x.mask()
	i := h & m
	for x.slots[i] != 0 {
		i = (i + 1) & m
	}
	x.slots[i] = x.entry(h, n)
}

// ensure adds record n of hash h unless it is there, in one probe.
func (x *index) ensure(h uint64, n uint32) {
	m, e := x.mask(), x.entry(h, n)
	i := h & m
	for ; x.slots[i] != 0; i = (i + 1) & m {
		if x.slots[i] == e {
			return
		}
	}
	x.slots[i] = e
}

// del empties position i, pulling later entries of its probe run into
// the hole unless their home lies cyclically in (hole, j].
func (x *index) del(t *table, i uint64) {
	m, low := x.mask(), x.low()
	for j := (i + 1) & m; x.slots[j] != 0; j = (j + 1) & m {
		k := t.hash(t.rec(x.slots[j]&low-1).id) & m
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		x.slots[i] = x.slots[j]
		i = j
	}
	x.slots[i] = 0
}
