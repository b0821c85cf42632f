package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// logCache keeps a group's most recent entries in memory, so that a
// leader sends them to its followers without reading them back from the
// log file, as raft.LogCache does; but bounded in bytes as well as in
// entries. raft's keeps its last entries whatever their size, on every
// replica: a shard entry carries up to --max-batch (4,096) checks of keys
// of up to 1 KiB, so 512 of them could hold gigabytes a group, beside
// the key states --max-state-mib bounds.
type logCache struct {
	store    raft.LogStore
	maxBytes int64

	mu    sync.RWMutex
	ring  []*raft.Log // the entry of index i at i % len(ring)
	first uint64      // the first cached index; the cached ones follow it
	n     int         // how many are cached
	bytes int64       // what they hold (entrySize)
}

// entryOverhead is what an entry holds beside its data and extensions:
// the raft.Log struct and its slices' headers.
const entryOverhead = 96

// newLogCache caches up to entries entries of store (at least one),
// holding up to maxBytes.
func newLogCache(store raft.LogStore, entries int, maxBytes int64) *logCache {
	return &logCache{store: store, maxBytes: maxBytes, ring: make([]*raft.Log, max(entries, 1))}
}

// entrySize is what an entry holds in memory.
func entrySize(l *raft.Log) int64 {
	return int64(len(l.Data)+len(l.Extensions)) + entryOverhead
}

// IsMonotonic implements raft.MonotonicLogStore as the store does: raft
// then keeps no gaps in the log after a snapshot's install.
func (c *logCache) IsMonotonic() bool {
	m, ok := c.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// GetLog implements raft.LogStore: a cached entry from memory, any other
// from the store.
func (c *logCache) GetLog(index uint64, out *raft.Log) error {
	c.mu.RLock()
	if index >= c.first && index-c.first < uint64(c.n) {
		*out = *c.ring[index%uint64(len(c.ring))]
		c.mu.RUnlock()
		return nil
	}
	c.mu.RUnlock()
	return c.store.GetLog(index, out)
}

// StoreLog implements raft.LogStore.
func (c *logCache) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: written to the store, then cached,
// the oldest cached entries dropped past either bound.
func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		if c.n > 0 && l.Index != c.first+uint64(c.n) {
			c.clear() // not the next index (raft never does this): start again
		}
		if c.n == 0 {
			c.first = l.Index
		}
		if c.n == len(c.ring) {
			c.dropOldest()
		}
		// A copy of the entry, not raft's: a leader's is a field of its
		// future, which holds the state machine's answer (64 bytes a
		// check), and a follower's an element of its AppendEntries
		// batch, which holds every entry of the batch; kept, either
		// would keep far more alive than entrySize counts.
		cp := *l
		c.ring[l.Index%uint64(len(c.ring))] = &cp
		c.n++
		c.bytes += entrySize(l)
		for c.n > 0 && c.bytes > c.maxBytes {
			c.dropOldest()
		}
	}
	return nil
}

// dropOldest forgets the oldest cached entry; c.mu is held.
func (c *logCache) dropOldest() {
	i := c.first % uint64(len(c.ring))
	c.bytes -= entrySize(c.ring[i])
	c.ring[i] = nil
	c.first++
	c.n--
}

// clear forgets every cached entry; c.mu is held.
func (c *logCache) clear() {
	for c.n > 0 {
		c.dropOldest()
	}
}

// FirstIndex implements raft.LogStore.
func (c *logCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }

// LastIndex implements raft.LogStore.
func (c *logCache) LastIndex() (uint64, error) { return c.store.LastIndex() }

// DeleteRange implements raft.LogStore. A compaction deletes a prefix of
// the log, which drops only the cached entries in it; any other range
// (a follower's conflicting suffix) clears the cache.
func (c *logCache) DeleteRange(lo, hi uint64) error {
	c.mu.Lock()
	switch {
	case c.n == 0 || hi < c.first:
	case lo <= c.first && hi < c.first+uint64(c.n)-1:
		for c.first <= hi {
			c.dropOldest()
		}
	default:
		c.clear()
	}
	c.mu.Unlock()
	return c.store.DeleteRange(lo, hi)
}
