package fsm

import (
	"fmt"
)

// PieceBytes is about the most bytes of key states one Raft entry carries
// when states are copied in bulk (a slot move's import, a restore's
// pieces). A larger entry holds up its group's log on every replica, and
// on the one connection a node keeps to each peer for every group
// (raftnet) it holds up every group's heartbeats behind it: 64 MiB take
// about half a second at 1 Gbps, time enough for healthy groups to call
// elections during a large move.
const PieceBytes = 4 << 20

// ImportPiece is a part of a move's export: whole slots and their states,
// in the export format, for one import entry (EncodeImport).
type ImportPiece struct {
	Slots  []uint32
	States []byte
}

// CutImport cuts export, the states of slots exported for a move (from
// ExportSlots), into pieces of whole slots of about max bytes of states at
// most, in the order of slots: a piece is over max only when one slot's
// states are. Every slot is in exactly one piece, those without states
// too, since an import takes a slot's ownership along with its states
// (importSlots). An export that fits is one piece, as it was. The slots'
// number comes from this shard's ownership record, which must exist: the
// importing group's.
func (s *Shard) CutImport(slots []uint32, export []byte, max int) ([]ImportPiece, error) {
	if len(export) <= max {
		return []ImportPiece{{Slots: slots, States: export}}, nil
	}
	s.mu.Lock()
	n := 0
	if s.own != nil {
		n = len(s.own.state)
	}
	s.mu.Unlock()
	if n == 0 {
		return nil, fmt.Errorf("%w: cut an import: the group has no ownership record", ErrNotOwned)
	}
	w, err := walkExport(export)
	if err != nil {
		return nil, err
	}
	of := make(map[int][]snapEntry, len(slots))
	for _, x := range slots {
		of[int(x)] = nil
	}
	for _, e := range w.entries {
		x := slotOfID(e.id, n)
		if _, ok := of[x]; !ok {
			return nil, fmt.Errorf("%w: cut an import: a state of slot %d, outside the move", ErrCorrupt, x)
		}
		of[x] = append(of[x], e)
	}
	var (
		out     []ImportPiece
		cur     = &shardSnapshot{now: w.now, buf: export}
		curSize int
		curSl   []uint32
	)
	flush := func() error {
		var sw sliceWriter
		if err := cur.writeTo(&sw); err != nil {
			return err
		}
		out = append(out, ImportPiece{Slots: curSl, States: sw})
		cur, curSize, curSl = &shardSnapshot{now: w.now, buf: export}, 0, nil
		return nil
	}
	for _, x := range slots { // ascending, each once: a move's
		size := 0
		for _, e := range of[int(x)] {
			size += e.end - e.off
		}
		if curSize > 0 && curSize+size > max {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		curSl = append(curSl, x)
		cur.entries = append(cur.entries, of[int(x)]...)
		curSize += size
	}
	if len(curSl) > 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
