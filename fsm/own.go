package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/policy"
)

// Entry types of slot ownership (docs/design/slots.md, "What a group's FSM
// owns"). Stored in Raft logs: never renumber.
const (
	// cmdInit sets the group's ownership record, once.
	cmdInit byte = 5
	// cmdFreeze stops the group counting a move's slots.
	cmdFreeze byte = 6
	// cmdImport takes a move's slots in, with their states.
	cmdImport byte = 7
	// cmdDrop deletes the frozen copies a finished move left.
	cmdDrop byte = 8
	// ownVersion versions the bodies of cmdInit to cmdDrop.
	ownVersion = 1
)

// Errors of slot ownership.
var (
	// ErrNotOwned refuses a check, reset or fast decision for a key whose
	// slot the group does not own now: nothing was counted.
	ErrNotOwned = errors.New("the group does not own the key's slot")
	// ErrNotFrozen refuses an export of slots not frozen by that move.
	ErrNotFrozen = errors.New("slots not frozen by that move")
	// ErrExportTooLarge refuses an export over MaxExport: the move's
	// target imports its slots in parts instead.
	ErrExportTooLarge = errors.New("export larger than one import entry may carry")
)

// MaxExport caps a move's export: one import entry carries it, and one
// gRPC answer when the target asks a peer for it (rpc sizes that answer
// by it).
const MaxExport = 64 << 20

// Slot states in ownership.state: absent, owned, or frozen by move m
// (stored as m+1, m ≥ 1).
const (
	slotAbsent uint64 = 0
	slotOwned  uint64 = 1
)

// ownership is which slots a group owns. It is replicated through the
// group's own log and snapshots only, never read from the meta state (a
// replica may see that late). nil in a legacy shard: no checks at all.
type ownership struct {
	group uint32
	state []uint64          // per slot
	last  map[uint32]uint64 // per slot that ever moved: the last move applied
}

func (o *ownership) slotOf(key string) int { return hashing.ShardOf(key, len(o.state)) }

// slotOfID returns the slot, of slots, of a state identity's key.
func slotOfID(id string, slots int) int { return hashing.ShardOf(keyOf(id), slots) }

// AllowResults is what a cmdAllow entry returns when the group refused
// some of its checks (nothing counted for those); an entry whose checks
// all counted returns []policy.Result.
type AllowResults struct {
	Results []policy.Result
	// NotOwned is true for each check whose slot the group does not own.
	NotOwned []bool
}

// OwnershipInfo describes a group's ownership record.
type OwnershipInfo struct {
	// Initialized: the record exists (cmdInit applied).
	Initialized bool
	Group       uint32
	SlotCount   int
	// Owned are the slots owned, ascending.
	Owned []uint32
	// Frozen are the slots frozen, by move.
	Frozen map[uint64][]uint32
}

// Ownership returns the group's ownership record.
func (s *Shard) Ownership() OwnershipInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.own
	if o == nil {
		return OwnershipInfo{}
	}
	info := OwnershipInfo{Initialized: true, Group: o.group, SlotCount: len(o.state), Frozen: map[uint64][]uint32{}}
	for slot, st := range o.state {
		switch {
		case st == slotOwned:
			info.Owned = append(info.Owned, uint32(slot))
		case st > slotOwned:
			info.Frozen[st-1] = append(info.Frozen[st-1], uint32(slot))
		}
	}
	return info
}

// MoveApplied reports whether this replica has applied move's freeze of
// slots (it holds every one of them frozen by the move) and whether it
// has applied the move's import of them (it took every one in by that
// move or a later one). A replica applies only committed entries, so
// either is the group's word that the step is done. Slots outside the
// record make both false.
func (s *Shard) MoveApplied(move uint64, slots []uint32) (frozen, imported bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.own
	if o == nil || move == 0 || len(slots) == 0 {
		return false, false
	}
	frozen, imported = true, true
	for _, x := range slots {
		if int(x) >= len(o.state) {
			return false, false
		}
		frozen = frozen && o.state[x] == move+1
		imported = imported && o.last[x] >= move
	}
	return frozen, imported
}

// Initialized reports whether the group has been told the slots it
// owns (Ownership().Initialized without copying them).
func (s *Shard) Initialized() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.own != nil
}

// Owns reports whether the group counts key now (always, without a
// record).
func (s *Shard) Owns(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.own == nil || s.own.state[s.own.slotOf(key)] == slotOwned
}

// owns is Owns of a key decoded from an entry; s.mu is held.
func (s *Shard) owns(key []byte) bool {
	return s.own == nil || s.own.state[hashing.ShardOfBytes(key, len(s.own.state))] == slotOwned
}

// EncodeInit returns a cmdInit entry: group owns the slots of owned
// (ascending) of slotCount.
func EncodeInit(group uint32, slotCount uint32, owned []uint32) []byte {
	b := []byte{cmdInit, ownVersion}
	b = binary.AppendUvarint(b, uint64(group))
	b = binary.AppendUvarint(b, uint64(slotCount))
	return appendSlots(b, owned)
}

// EncodeFreeze returns a cmdFreeze entry for move's slots.
func EncodeFreeze(move uint64, slots []uint32) []byte {
	b := binary.AppendUvarint([]byte{cmdFreeze, ownVersion}, move)
	return appendSlots(b, slots)
}

// EncodeDrop returns a cmdDrop entry for move.
func EncodeDrop(move uint64) []byte {
	return binary.AppendUvarint([]byte{cmdDrop, ownVersion}, move)
}

// EncodeImport returns a cmdImport entry taking move's slots from group
// from, with their states as ExportSlots wrote them.
func EncodeImport(move uint64, from uint32, slots []uint32, export []byte) []byte {
	b := binary.AppendUvarint([]byte{cmdImport, ownVersion}, move)
	b = binary.AppendUvarint(b, uint64(from))
	b = appendSlots(b, slots)
	return append(b, export...)
}

func appendSlots(b []byte, slots []uint32) []byte {
	b = binary.AppendUvarint(b, uint64(len(slots)))
	for _, s := range slots {
		b = binary.AppendUvarint(b, uint64(s))
	}
	return b
}

// slots reads a slot list: ascending, each below count.
func (r *reader) slots(count int) []uint32 {
	n := r.uvarint("slot count", uint64(len(r.b)))
	out := make([]uint32, 0, min(n, 1<<16))
	for i := uint64(0); i < n && r.err == nil; i++ {
		s := r.uvarint("slot", uint64(count-1))
		if len(out) > 0 && uint32(s) <= out[len(out)-1] {
			r.fail("slots not ascending")
		}
		out = append(out, uint32(s))
	}
	return out
}

// applyOwn applies the ownership entries.
func (s *Shard) applyOwn(typ byte, body []byte) error {
	r := &reader{b: body}
	r.version(ownVersion)
	if typ == cmdInit {
		group := r.uvarint("group", 1<<32-1)
		count := r.uvarint("slot count", maxSlots)
		if count == 0 {
			r.fail("slot count")
		}
		owned := r.slots(int(count))
		if r.err == nil && r.off != len(body) {
			r.fail("trailing bytes")
		}
		if r.err != nil {
			return r.err
		}
		if s.own != nil {
			return nil // set once: a later init changes nothing
		}
		o := &ownership{group: uint32(group), state: make([]uint64, count), last: map[uint32]uint64{}}
		for _, sl := range owned {
			o.state[sl] = slotOwned
		}
		s.own = o
		s.tab.countSlots(o)
		return nil
	}
	if s.own == nil {
		return fmt.Errorf("%w: slot entry type %d without an ownership record", ErrCorrupt, typ)
	}
	o := s.own
	move := r.uvarint("move", 1<<62)
	if move == 0 {
		r.fail("move")
	}
	switch typ {
	case cmdFreeze:
		sl := r.slots(len(o.state))
		if r.err == nil && r.off != len(body) {
			r.fail("trailing bytes")
		}
		if r.err != nil {
			return r.err
		}
		for _, x := range sl {
			// A slot a later move brought back is not the move's: the
			// freeze is a stale leader's (its meta view still has the
			// move planned, long after it finished). Frozen by it, the
			// slot would be dropped as the finished move's leftover,
			// while the table names this group.
			if o.state[x] == slotOwned && o.last[x] < move {
				o.state[x] = move + 1
			}
		}
	case cmdDrop:
		if r.err == nil && r.off != len(body) {
			r.fail("trailing bytes")
		}
		if r.err != nil {
			return r.err
		}
		// The slots' records stay behind as orphans for the sweeper
		// (orphans.go): freeing them here looked at every record. The
		// move's watch, if this replica has one, has served.
		s.tab.unwatch(move)
		for x, st := range o.state {
			if st == move+1 {
				o.state[x] = slotAbsent
				s.tab.counts.abandon(x)
			}
		}
	case cmdImport:
		r.uvarint("from", 1<<32-1)
		sl := r.slots(len(o.state))
		if r.err != nil {
			return r.err
		}
		return s.importSlots(move, sl, body[r.off:])
	}
	return nil
}

// importSlots applies an import: each slot of sl not already at move ≥
// move drops what it held (a stale frozen copy, or orphans the sweeper
// has not reached: a look at every record, only for a slot that has
// records) and takes the exported states. The export is checked whole
// before anything changes.
func (s *Shard) importSlots(move uint64, sl []uint32, export []byte) error {
	o := s.own
	tab, now, _, err := decodeShardSnapshot(export)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	in := map[int]bool{}
	for _, x := range sl {
		in[int(x)] = true
	}
	var bad error
	tab.each(func(r *record) {
		if bad == nil && !in[slotOfID(r.id, len(o.state))] {
			bad = fmt.Errorf("%w: import: a state of a slot outside the move", ErrCorrupt)
		}
	})
	if bad != nil {
		return bad
	}
	take, stale := map[int]bool{}, map[int]bool{}
	for _, x := range sl {
		if o.last[x] < move {
			take[int(x)] = true
			if s.tab.counts.n[x] > 0 {
				stale[int(x)] = true // orphans, or a stale frozen copy
			}
		}
	}
	s.removeSlots(stale)
	tab.each(func(r *record) {
		if take[slotOfID(r.id, len(o.state))] {
			s.tab.insert([]byte(r.id), r.st)
		}
	})
	for x := range take {
		o.state[x], o.last[uint32(x)] = slotOwned, move
	}
	s.advance(now)
	return nil
}

// removeSlots deletes every state whose key is in one of slots. It looks
// at every record.
func (s *Shard) removeSlots(slots map[int]bool) {
	if len(slots) == 0 {
		return
	}
	var ids []string
	s.tab.each(func(r *record) {
		if slots[slotOfID(r.id, len(s.own.state))] {
			ids = append(ids, r.id)
		}
	})
	for _, id := range ids {
		if n, ok := s.tab.lookup([]byte(id)); ok {
			s.tab.remove(n)
		}
	}
}

// ExportSlots returns the live states of slots, which must all be frozen
// by move, with the log time, in the shard snapshot format: what the
// move's target imports. It captures as a snapshot does (capture.go), so
// applies go on meanwhile.
func (s *Shard) ExportSlots(move uint64, slots []uint32) ([]byte, error) {
	s.mu.Lock()
	t, watch := s.tab, s.tab.watchOf(move)
	s.mu.Unlock()
	if watch != nil {
		s.fillWatch(t, watch) // a walk still under way: outside the lock's hold
	}
	s.mu.Lock()
	c, err := s.captureSlots(move, slots)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	w, err := s.export(c)
	if err == nil && len(w) > MaxExport {
		err = fmt.Errorf("%w: export of %d slots is %d bytes, over %d", ErrExportTooLarge, len(slots), len(w), MaxExport)
	}
	return w, err
}

// captureSlots starts a capture of the states of slots, which must all be
// frozen by move. s.mu must be held.
func (s *Shard) captureSlots(move uint64, slots []uint32) (*capture, error) {
	o := s.own
	if o == nil {
		return nil, fmt.Errorf("%w: the group has no ownership record", ErrNotFrozen)
	}
	in := map[int]bool{}
	for _, x := range slots {
		if int(x) >= len(o.state) || o.state[x] != move+1 {
			return nil, fmt.Errorf("%w: slot %d is not frozen by move %d", ErrNotFrozen, x, move)
		}
		in[int(x)] = true
	}
	c := s.startCapture(func(id string) bool { return in[slotOfID(id, len(o.state))] })
	if w := s.tab.watchOf(move); w != nil && w.ready() && w.covers(slots) {
		// Every record of the slots is on the watch's list: read only
		// those, not every record for them.
		c.sparse, c.cand = true, slices.Clone(w.recs)
		s.sparseExports++
	}
	return c, nil
}

type sliceWriter []byte

func (w *sliceWriter) Write(p []byte) (int, error) {
	*w = append(*w, p...)
	return len(p), nil
}

// keyOf returns the key of a state identity (its first field).
func keyOf(id string) string {
	n, k := uvarintString(id)
	if k <= 0 || n > uint64(len(id)-k) {
		return ""
	}
	return id[k : k+int(n)]
}

// appendOwnership writes the record for a snapshot: group, slot count,
// runs of equal slot states, and the last moves sorted by slot.
func appendOwnership(b []byte, o *ownership) []byte {
	b = binary.AppendUvarint(b, uint64(o.group))
	b = binary.AppendUvarint(b, uint64(len(o.state)))
	var runs [][2]uint64 // (count, state)
	for _, st := range o.state {
		if n := len(runs); n > 0 && runs[n-1][1] == st {
			runs[n-1][0]++
			continue
		}
		runs = append(runs, [2]uint64{1, st})
	}
	b = binary.AppendUvarint(b, uint64(len(runs)))
	for _, r := range runs {
		b = binary.AppendUvarint(b, r[0])
		b = binary.AppendUvarint(b, r[1])
	}
	keys := make([]uint32, 0, len(o.last))
	for k := range o.last {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(k))
		b = binary.AppendUvarint(b, o.last[k])
	}
	return b
}

// readOwnership reads what appendOwnership wrote.
func readOwnership(b []byte) (*ownership, error) {
	r := &reader{b: b}
	o := &ownership{group: uint32(r.uvarint("group", 1<<32-1)), last: map[uint32]uint64{}}
	count := r.uvarint("slot count", maxSlots)
	runs := r.uvarint("runs", count)
	o.state = make([]uint64, 0, count)
	for i := uint64(0); i < runs && r.err == nil; i++ {
		n := r.uvarint("run", count-uint64(len(o.state)))
		st := r.uvarint("slot state", 1<<62)
		for range n {
			o.state = append(o.state, st)
		}
	}
	if r.err == nil && uint64(len(o.state)) != count || count == 0 {
		r.fail("slot states")
	}
	nl := r.uvarint("last moves", count)
	for i := uint64(0); i < nl && r.err == nil; i++ {
		o.last[uint32(r.uvarint("slot", count-1))] = r.uvarint("move", 1<<62)
	}
	if r.err == nil && r.off != len(b) {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, fmt.Errorf("ownership: %w", r.err)
	}
	return o, nil
}
