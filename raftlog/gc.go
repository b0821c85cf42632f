package raftlog

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
)

// collect deletes, oldest first, the segments before the oldest one any
// group still has an entry in. Only a prefix ever goes, so each delete or
// drop record that follows a kept entry is kept too, and stable keys live
// on in the checkpoint each later segment starts with. Only the flusher
// calls it.
func (s *Store) collect() error {
	need := s.active().seq
	for _, g := range s.groups {
		if seq := g.firstSeg(); seq != 0 && seq < need {
			need = seq
		}
	}
	if s.opts.NoSync && len(s.segs) > 1 && s.segs[0].seq < need {
		// What makes the old segments unneeded (a reset, a delete, a
		// drop) may be in the active segment's unsynced tail: it must be
		// on disk before they go, or a power cut loses entries that were.
		if err := s.ops.sync(s.active().f); err != nil {
			return fmt.Errorf("sync %s: %w", s.active().path, err)
		}
	}
	for len(s.segs) > 1 && s.segs[0].seq < need {
		seg := s.segs[0]
		s.mu.Lock() // readers hold mu across ReadAt
		s.segs = s.segs[1:]
		s.mu.Unlock()
		seg.f.Close()
		if err := os.Remove(seg.path); err != nil {
			return fmt.Errorf("delete %s: %w", seg.path, err)
		}
		// One at a time, durably: a crash must never leave a newer
		// segment removed and an older one present (a gap replay
		// would refuse).
		if err := syncDir(s.dir); err != nil {
			return fmt.Errorf("delete %s: %w", seg.path, err)
		}
	}
	return nil
}

// rewritePinned copies the whole log of each group whose first entry is in
// the oldest segment to the active one, as one reset record each, so the
// oldest segment can go. A group that writes rarely never snapshots and
// would otherwise keep every later segment alive. A group whose log is
// large is left alone: it writes a lot, so it snapshots, and truncates,
// soon.
func (s *Store) rewritePinned() error {
	oldest := s.segs[0].seq
	var names []string
	var total int64
	for name, g := range s.groups {
		if g.firstSeg() != oldest {
			continue
		}
		names = append(names, name)
		for _, l := range g.locs {
			total += int64(l.n)
		}
	}
	if len(names) == 0 || total > s.opts.SegmentSize/2 {
		return nil
	}
	slices.Sort(names)
	batch := make([]*op, 0, len(names))
	for _, name := range names {
		g := s.groups[name]
		raws := make([][]byte, len(g.locs))
		for i, l := range g.locs {
			raw, err := s.readEntry(l)
			if err != nil {
				return fmt.Errorf("rewrite %s entry %d: %w", name, g.first+uint64(i), err)
			}
			raws[i] = raw
		}
		rec, spans := encodeRaw(name, g.first, raws)
		batch = append(batch, &op{rec: rec, r: record{typ: recReset, group: name, first: g.first, spans: spans}})
	}
	_, err := s.writeBatch(batch, nil)
	return err
}

// readEntry reads an entry's bytes and checks them. The caller is the
// flusher, the only one that closes segments.
func (s *Store) readEntry(l loc) ([]byte, error) {
	seg := s.segment(l.seg)
	if seg == nil {
		return nil, fmt.Errorf("%w: segment %d is gone", ErrCorrupt, l.seg)
	}
	buf := make([]byte, l.n)
	if _, err := seg.f.ReadAt(buf, int64(l.off)); err != nil {
		return nil, err
	}
	if len(buf) < 4 || checksum(buf[4:]) != binary.LittleEndian.Uint32(buf) {
		return nil, fmt.Errorf("%w: entry checksum mismatch in %s at %d", ErrCorrupt, seg.path, l.off)
	}
	return buf, nil
}
