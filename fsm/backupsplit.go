package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Splitter splits a backup's states records (ExportAll's format) by the
// group GroupOf names for each key, each part in the same format, for
// EncodeRestore. It counts each key once, however many records hold it: a
// backup of an older release, taken while slots moved, may hold a key in
// both groups of a move.
type Splitter struct {
	// GroupOf names the group that owns key; -1 leaves the key out.
	GroupOf func(key string) int
	// Keys counts the distinct keys split to a group so far; Skipped the
	// distinct keys left out.
	Keys, Skipped int
	seen          map[string]bool
}

// Split splits one record: its parts by group, and its log time (Unix
// nanoseconds), which a restore moves the group's clock to. The counts
// are only good while Split returns no error.
func (sp *Splitter) Split(states []byte) (parts map[int][]byte, logTime int64, err error) {
	tab, now, _, err := decodeShardSnapshot(states)
	if err != nil {
		return nil, 0, err
	}
	if sp.seen == nil {
		sp.seen = map[string]bool{}
	}
	split := map[int]*shardSnapshot{}
	tab.each(func(r *record) {
		if err != nil {
			return
		}
		key := keyOf(r.id)
		g := sp.GroupOf(key)
		if !sp.seen[key] {
			sp.seen[key] = true
			if g < 0 {
				sp.Skipped++
			} else {
				sp.Keys++
			}
		}
		if g < 0 {
			return
		}
		snap := split[g]
		if snap == nil {
			snap = &shardSnapshot{now: now}
			split[g] = snap
		}
		err = snap.add(r)
	})
	if err != nil {
		return nil, 0, err
	}
	parts = map[int][]byte{}
	for g, snap := range split {
		var w sliceWriter
		if err := snap.writeTo(&w); err != nil {
			return nil, 0, err
		}
		parts[g] = w
	}
	return parts, now, nil
}

// OneCopyPerKey returns the exports of groups (exports[i] is ExportAll's
// of groups[i]) with each key in one of them only. While slots move, the
// source's frozen copy of a key and the target's imported one are both
// exported; the copy kept is the one of the group ownerOf names (the slot
// table the backup follows), else, when that group holds none (it has not
// imported the slot yet), the first export's that does. An export that
// loses no key is returned as it was.
func OneCopyPerKey(exports [][]byte, groups []int, ownerOf func(key string) int) ([][]byte, error) {
	if len(exports) != len(groups) {
		return nil, fmt.Errorf("%d exports of %d groups", len(exports), len(groups))
	}
	walked := make([]exportEntries, len(exports))
	// The first export holding each key its owner does not: there are
	// such keys only while slots move.
	stray := map[string]int{}
	for i, data := range exports {
		var err error
		if walked[i], err = walkExport(data); err != nil {
			return nil, fmt.Errorf("group %d's export: %w", groups[i], err)
		}
		for _, e := range walked[i].entries {
			if key := keyOf(e.id); ownerOf(key) != groups[i] {
				if _, ok := stray[key]; !ok {
					stray[key] = i
				}
			}
		}
	}
	if len(stray) == 0 {
		return exports, nil
	}
	for i := range exports {
		for _, e := range walked[i].entries {
			if key := keyOf(e.id); ownerOf(key) == groups[i] {
				if _, ok := stray[key]; ok {
					stray[key] = -1 // its owner holds it: no other copy is kept
				}
			}
		}
	}
	out := make([][]byte, len(exports))
	for i, data := range exports {
		w := walked[i]
		kept := w.entries[:0:0]
		for _, e := range w.entries {
			key := keyOf(e.id)
			if j, ok := stray[key]; ownerOf(key) == groups[i] || ok && j == i {
				kept = append(kept, e)
			}
		}
		if len(kept) == len(w.entries) {
			out[i] = data
			continue
		}
		snap := &shardSnapshot{now: w.now, buf: data, entries: kept}
		var sw sliceWriter
		if err := snap.writeTo(&sw); err != nil {
			return nil, err
		}
		out[i] = sw
	}
	return out, nil
}

// exportEntries are an export's log time and entries, each its bytes in
// the export.
type exportEntries struct {
	now     int64
	entries []snapEntry
}

// walkExport checks an export (the shard snapshot format without an
// ownership record, as ExportAll writes it) and finds its entries without
// decoding their states.
func walkExport(data []byte) (exportEntries, error) {
	var w exportEntries
	if len(data) < len(shardMagic)+1+4 || string(data[:len(shardMagic)]) != shardMagic {
		return w, fmt.Errorf("%w: not a shard snapshot", ErrCorrupt)
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(data[len(body):]) {
		return w, fmt.Errorf("%w: shard snapshot checksum mismatch", ErrCorrupt) // first: see decodeShardSnapshot
	}
	if v := data[len(shardMagic)]; v > shardVersion {
		return w, fmt.Errorf("%w: %w: an export of shard snapshot version %d, this binary reads up to %d", ErrSnapshotVersion, errNewer, v, shardVersion)
	} else if v != shardVersionNoOwn {
		return w, fmt.Errorf("%w: an export of shard snapshot version %d", ErrSnapshotVersion, v)
	}
	r := bytes.NewReader(body[len(shardMagic)+1:])
	now, err := binary.ReadVarint(r)
	if err != nil {
		return w, fmt.Errorf("%w: shard snapshot header", ErrCorrupt)
	}
	count, err := binary.ReadUvarint(r)
	if err != nil || count > uint64(len(body)) {
		return w, fmt.Errorf("%w: shard snapshot header", ErrCorrupt)
	}
	w.now, w.entries = now, make([]snapEntry, 0, count)
	off := len(body) - r.Len()
	for i := uint64(0); i < count; i++ {
		start := off
		var id []byte
		for f := range 2 { // the identity, then the state
			n, k := binary.Uvarint(body[off:])
			if k <= 0 || n > uint64(len(body)-off-k) {
				return w, fmt.Errorf("shard snapshot entry %d: %w: length", i, ErrCorrupt)
			}
			if f == 0 {
				id = body[off+k : off+k+int(n)]
			}
			off += k + int(n)
		}
		w.entries = append(w.entries, snapEntry{id: string(id), off: start, end: off})
	}
	if off != len(body) {
		return w, fmt.Errorf("%w: %d trailing bytes in shard snapshot", ErrCorrupt, len(body)-off)
	}
	return w, nil
}

// CutStates cuts states (a part Split returned, or an export) into pieces
// of about max bytes at most, each in the same format with the same log
// time, every key's states in one piece (a restore replaces a key's
// states whole). A restore sends each piece as one message and one Raft
// entry: a group's part of a backup may be 64 MiB, more than a node's
// gRPC server reads in one message, and a Raft entry that size holds the
// group's log up. A piece is over max only by one key's states. states
// that fit are returned as they are.
func CutStates(states []byte, max int) ([][]byte, error) {
	if len(states) <= max {
		return [][]byte{states}, nil
	}
	w, err := walkExport(states)
	if err != nil {
		return nil, err
	}
	var pieces [][]snapEntry
	sizes := []int{}
	pieceOf := map[string]int{}
	for _, e := range w.entries {
		key := keyOf(e.id)
		i, ok := pieceOf[key]
		if !ok {
			i = len(pieces) - 1
			if i < 0 || sizes[i] >= max {
				pieces, sizes = append(pieces, nil), append(sizes, 0)
				i++
			}
			pieceOf[key] = i
		}
		pieces[i] = append(pieces[i], e)
		sizes[i] += e.end - e.off
	}
	out := make([][]byte, len(pieces))
	for i, entries := range pieces {
		var sw sliceWriter
		if err := (&shardSnapshot{now: w.now, buf: states, entries: entries}).writeTo(&sw); err != nil {
			return nil, err
		}
		out[i] = sw
	}
	return out, nil
}
