package raftlog

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// Group is one Raft group's view of the store: a raft.LogStore (also
// raft.MonotonicLogStore) and a raft.StableStore.
type Group struct {
	s    *Store
	name string
	// opMu orders the group's writes: raft truncates the head from its
	// snapshot goroutine while its main goroutine appends, and each write
	// must be checked against the log as the writes before it left it.
	opMu    sync.Mutex
	dropped bool // guarded by s.mu
}

var (
	_ raft.LogStore          = (*Group)(nil)
	_ raft.MonotonicLogStore = (*Group)(nil)
	_ raft.StableStore       = (*Group)(nil)
)

// Name is the group's name in the log.
func (g *Group) Name() string { return g.name }

// state returns the group's state (nil when it has none); the caller
// holds s.mu.
func (g *Group) state() (*groupState, error) {
	if g.dropped {
		return nil, fmt.Errorf("%w: %s", ErrDropped, g.name)
	}
	return g.s.groups[g.name], nil
}

// FirstIndex returns the first index in the log, 0 when it is empty.
func (g *Group) FirstIndex() (uint64, error) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	st, err := g.state()
	if st == nil {
		return 0, err
	}
	return st.firstIndex(), nil
}

// Size is how many entries the group's log holds, and their bytes (the
// entries as raft gave them, encoded): what a group's log retention is
// judged by.
func (g *Group) Size() (entries int, bytes int64) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	st, _ := g.state()
	if st == nil {
		return 0, 0
	}
	return len(st.locs), st.bytes
}

// LastIndex returns the last index in the log, 0 when it is empty.
func (g *Group) LastIndex() (uint64, error) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	st, err := g.state()
	if st == nil {
		return 0, err
	}
	return st.lastIndex(), nil
}

// GetLog reads entry index, or returns raft.ErrLogNotFound.
func (g *Group) GetLog(index uint64, out *raft.Log) error {
	s := g.s
	s.mu.RLock()
	st, err := g.state()
	if st == nil || len(st.locs) == 0 || index < st.firstIndex() || index > st.lastIndex() {
		s.mu.RUnlock()
		if err != nil {
			return err
		}
		return raft.ErrLogNotFound
	}
	l := st.locs[index-st.first]
	buf := make([]byte, l.n)
	// Read under the lock: GC closes a segment only under it.
	seg := s.segment(l.seg)
	if seg == nil {
		s.mu.RUnlock()
		return fmt.Errorf("%w: segment %d of entry %d of %s is gone", ErrCorrupt, l.seg, index, g.name)
	}
	_, err = seg.f.ReadAt(buf, int64(l.off))
	s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("raftlog: read entry %d of %s: %w", index, g.name, err)
	}
	return decodeEntry(buf, index, out)
}

// StoreLog stores one entry.
func (g *Group) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

// StoreLogs appends entries, which must follow the log's last index
// without a gap (or start anywhere in an empty log), as one record:
// durable all or none, and durable when it returns.
func (g *Group) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	for i, l := range logs[1:] {
		if l.Index != logs[0].Index+uint64(i)+1 {
			return fmt.Errorf("raftlog: %s: %w: entry %d follows %d", g.name, errNonSequential, l.Index, logs[i].Index)
		}
	}
	g.opMu.Lock()
	defer g.opMu.Unlock()
	g.s.mu.RLock()
	st, err := g.state()
	if err == nil {
		if st == nil {
			st = &groupState{} // a new group: the checks of an empty log
		}
		err = st.checkAppend(logs[0].Index, len(logs))
	}
	g.s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("raftlog: %s: %w", g.name, err)
	}
	rec, spans := encodeEntries(recAppend, g.name, logs)
	return g.s.commit(rec, record{typ: recAppend, group: g.name, first: logs[0].Index, spans: spans})
}

// DeleteRange removes the entries in [min, max], which must be a head or a
// tail of the log (raft's truncation after a snapshot, and on a conflict).
func (g *Group) DeleteRange(min, max uint64) error {
	g.opMu.Lock()
	defer g.opMu.Unlock()
	g.s.mu.RLock()
	st, err := g.state()
	if err == nil && st != nil {
		err = st.checkDelete(min, max)
	}
	empty := st == nil || st.lastIndex() == 0 || min > max || max < st.firstIndex() || min > st.lastIndex()
	g.s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("raftlog: %s: %w", g.name, err)
	}
	if empty {
		return nil // nothing to remove: no record
	}
	return g.s.commit(encodeDelete(g.name, min, max), record{typ: recDelete, group: g.name, min: min, max: max})
}

// IsMonotonic tells raft that the log never has gaps, so after installing
// a snapshot it empties the log instead of leaving the old entries behind.
func (g *Group) IsMonotonic() bool { return true }

// Set stores a stable key, durably.
func (g *Group) Set(key, val []byte) error {
	g.opMu.Lock()
	defer g.opMu.Unlock()
	g.s.mu.RLock()
	_, err := g.state()
	g.s.mu.RUnlock()
	if err != nil {
		return err
	}
	return g.s.commit(encodeSet(g.name, key, val), record{typ: recSet, group: g.name, key: key, val: val})
}

// Get returns a stable key, or ErrKeyNotFound.
func (g *Group) Get(key []byte) ([]byte, error) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	st, err := g.state()
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, ErrKeyNotFound
	}
	v, ok := st.kv[string(key)]
	if !ok {
		return nil, ErrKeyNotFound
	}
	return append([]byte(nil), v...), nil
}

// SetUint64 stores a stable key holding an integer (8 bytes, big-endian,
// as raft-boltdb stores them).
func (g *Group) SetUint64(key []byte, val uint64) error {
	return g.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns an integer stable key, or ErrKeyNotFound.
func (g *Group) GetUint64(key []byte) (uint64, error) {
	v, err := g.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftlog: %s: key %q holds %d bytes, not an integer", g.name, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
