package fsm

import "slices"

// orphanSweep is how many records the sweeper looks at per call while a
// dropped slot's records remain: about 55 µs of an apply (a record's key
// hashed to its slot), so a group of 500,000 states frees the 7,800
// states of a drop of 64 slots over 489 entries, where freeing them in
// the drop's own entry held every apply of the group for 18 ms
// (BenchmarkDropSlots).
const orphanSweep = 1024

// slotCounts counts a table's live records per slot, so that a drop (the
// end of a slot's move away) leaves the slot's records behind instead of
// looking at every record while applies wait. A dropped slot that still
// has records is gone, and its records are orphans:
//
//   - no check reads them: the slot is absent from the group, so every
//     check of its keys is refused before the table is read;
//   - no capture writes them (startCapture notes the gone slots);
//   - the sweeper frees them, looking at orphanSweep records at a time;
//   - an import of the slot frees them first (importSlots), a look at every
//     record as a drop used to take: only a slot that comes back before
//     its orphans are swept pays it.
//
// Freeing an orphan changes memory, never an answer or a snapshot, so
// replicas may free them at different paces, as they do expired states.
type slotCounts struct {
	n []uint32 // live records per slot
	// bytes is what each slot's live records hold (table.bytes, by
	// slot): what MaxSlotBytes bounds.
	bytes   []int64
	gone    []bool // dropped slots with records left
	orphans int    // records in gone slots
	// step is what the sweeper looks at per call while there are orphans:
	// orphanSweep, or less in tests that keep orphans about.
	step int
}

// countSlots counts t's records by slot, for slots slots, and marks gone
// the slots own holds absent that still have records (a restored
// snapshot's, should it carry any). It looks at every record: it runs on
// a restore, outside the lock, and at a group's init entry, its first,
// when the table is empty.
func (t *table) countSlots(own *ownership) {
	c := newSlotCounts(len(own.state))
	t.each(func(r *record) {
		x := c.slotOf(r.id)
		c.n[x]++
		c.bytes[x] += recordSize(r)
	})
	for x, k := range c.n {
		if k > 0 && own.state[x] == slotAbsent {
			c.gone[x], c.orphans = true, c.orphans+int(k)
		}
	}
	t.counts = c
}

// newSlotCounts counts nothing yet, in slots slots.
func newSlotCounts(slots int) *slotCounts {
	return &slotCounts{n: make([]uint32, slots), bytes: make([]int64, slots), gone: make([]bool, slots), step: orphanSweep}
}

// slotOf returns the slot of a state identity.
func (c *slotCounts) slotOf(id string) int { return slotOfID(id, len(c.n)) }

// added counts a record inserted with identity id, holding size bytes,
// and returns its slot.
func (c *slotCounts) added(id string, size int64) int {
	x := c.slotOf(id)
	c.n[x]++
	c.bytes[x] += size
	return x
}

// removed uncounts a record freed with identity id, which held size bytes.
func (c *slotCounts) removed(id string, size int64) {
	x := c.slotOf(id)
	c.n[x]--
	c.bytes[x] -= size
	if c.gone[x] {
		c.orphans--
		c.gone[x] = c.n[x] > 0
	}
}

// abandon marks slot x gone if it has records: the group no longer holds
// it, and its records wait for the sweeper.
func (c *slotCounts) abandon(x int) {
	if c.n[x] > 0 && !c.gone[x] {
		c.gone[x], c.orphans = true, c.orphans+int(c.n[x])
	}
}

// orphan reports whether identity id belongs to a gone slot.
func (c *slotCounts) orphan(id string) bool {
	return c.orphans > 0 && c.gone[c.slotOf(id)]
}

// goneSlots returns a copy of the gone slots, nil if there are none: what
// a capture starting now leaves out.
func (c *slotCounts) goneSlots() []bool {
	if c == nil || c.orphans == 0 {
		return nil
	}
	return slices.Clone(c.gone)
}

// orphans returns how many records of t are orphans.
func (t *table) orphans() int {
	if t.counts == nil {
		return 0
	}
	return t.counts.orphans
}

// held returns how many live states t holds for its group: its records
// less the orphans.
func (t *table) held() int { return t.live - t.orphans() }

// holds reports whether the group holds a state of identity id: a record
// that is not an orphan, which is memory for the sweeper, not a state.
func (t *table) holds(id []byte) bool {
	n, ok := t.lookup(id)
	return ok && (t.orphans() == 0 || !t.counts.orphan(t.rec(n).id))
}
