package fsm

import (
	"errors"
	"fmt"
)

// cmdRestore puts states from a backup (floodgatectl snapshot restore)
// into the group: each key's states replace what the group holds for that
// key. Stored in Raft logs: never renumber. Its body is restoreVersion,
// then states in the shard snapshot format.
const (
	cmdRestore     byte = 9
	restoreVersion byte = 1
)

// ExportAll returns every live state of the group, with the log time, in
// the shard snapshot format: a backup of its counters. It captures as a
// snapshot does (capture.go), so applies go on meanwhile.
func (s *Shard) ExportAll() ([]byte, error) {
	s.mu.Lock()
	c := s.startCapture(nil)
	s.mu.Unlock()
	return s.export(c)
}

// EncodeRestore returns a cmdRestore entry putting states (shard snapshot
// format) into the group.
func EncodeRestore(states []byte) []byte {
	return append([]byte{cmdRestore, restoreVersion}, states...)
}

// applyRestore applies a cmdRestore entry: all or nothing. Every key must
// be in a slot the group owns (the sender split the backup by the slot
// table it saw; a slot that moved since refuses the entry, ErrNotOwned).
func (s *Shard) applyRestore(body []byte) error {
	if len(body) < 1 || body[0] != restoreVersion {
		return fmt.Errorf("%w: restore body version", ErrCorrupt)
	}
	tab, now, _, err := decodeShardSnapshot(body[1:])
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			// A states format this binary does not know, inside a body it
			// does: refused like any bad body, by every replica alike,
			// unless it is a newer one (Shard.apply stops on it). The
			// leader decodes the states before it proposes the entry
			// (HeldAfterRestore; an import's export, CountStates), so
			// neither a client's file nor a newer leader's export gets
			// this far.
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return fmt.Errorf("restore: %w", err)
	}
	var bad error
	keys := map[string]bool{}
	tab.each(func(r *record) {
		key := keyOf(r.id)
		if bad == nil && !s.owns([]byte(key)) {
			bad = fmt.Errorf("restore of key %q: %w", key, ErrNotOwned)
		}
		keys[key] = true
	})
	if bad != nil {
		return bad
	}
	// A key's states are replaced whole: a limit the backup does not hold
	// for the key is not kept beside those it does.
	var drop []string
	s.tab.each(func(r *record) {
		if keys[keyOf(r.id)] {
			drop = append(drop, r.id)
		}
	})
	for _, id := range drop {
		if n, ok := s.tab.lookup([]byte(id)); ok {
			s.tab.remove(n)
		}
	}
	tab.each(func(r *record) {
		s.tab.insert([]byte(r.id), r.st)
	})
	s.advance(now)
	s.forgetOverlayOf(keys)
	return nil
}

// forgetOverlayOf discards the leader's fast overlay if it holds a copy of
// a state of keys, which a restore just replaced: a key with fast
// decisions always on their way (a busy one) was decided on its old copy
// for as long as they kept coming, the restored counts ignored. As at a
// change of leader, what is in flight is then counted only once it
// commits (the fast bound), and releases of the old generation are
// ignored. Only the leader has an overlay; s.mu is held.
func (s *Shard) forgetOverlayOf(keys map[string]bool) {
	for id := range s.ov.entries {
		if keys[keyOf(id)] {
			s.ov.gen++
			s.ov.entries = map[string]*overlayState{}
			s.noteOverlay()
			return
		}
	}
}

// HeldAfterRestore says what the group would hold if states (a restore's,
// in the shard snapshot format without ownership) were applied: key
// states, those it holds now with fast decisions' on their way and each
// of the states' identities it holds none of; and bytes, those its states
// hold now and what the restored states would hold, beside what Vet has
// reserved. A restored key's records the states do not hold are dropped,
// so both may be over, never under: the leader refuses a restore beyond
// --max-key-states or --max-state-mib by them (applies never check those
// bounds: the leader vets what it proposes). fullest is what the fullest
// slot the states fill would hold (0 in a group without slots), which
// the leader holds to MaxSlotBytes.
func (s *Shard) HeldAfterRestore(states []byte) (held Room, fullest int64, err error) {
	restored, _, _, err := decodeShardSnapshot(states)
	if err != nil {
		return Room{}, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	reserved := s.reserved()
	held = Room{States: s.held() + reserved.States, Bytes: s.tab.bytes + reserved.Bytes + restored.bytes}
	var slots map[int]int64
	if s.tab.counts != nil {
		slots = map[int]int64{}
	}
	restored.each(func(r *record) {
		if !s.tab.holds([]byte(r.id)) && s.ov.entries[r.id] == nil {
			held.States++
		}
		if slots != nil {
			x := s.tab.counts.slotOf(r.id)
			if _, ok := slots[x]; !ok {
				slots[x] = s.tab.counts.bytes[x]
			}
			slots[x] += recordSize(r)
			fullest = max(fullest, slots[x])
		}
	})
	return held, fullest, nil
}

// CountStates returns how many key states (one per key and limit) states
// hold, in the shard snapshot format without ownership, and the bytes
// they would hold in a group (records, identities, buffers).
func CountStates(states []byte) (Room, error) {
	tab, _, _, err := decodeShardSnapshot(states)
	if err != nil {
		return Room{}, err
	}
	return Room{States: tab.live, Bytes: tab.bytes}, nil
}
