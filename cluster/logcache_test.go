package cluster

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// countingStore counts the reads that reach the store behind a cache.
type countingStore struct {
	*raft.InmemStore
	mu    sync.Mutex
	reads int
}

func (s *countingStore) GetLog(index uint64, out *raft.Log) error {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	return s.InmemStore.GetLog(index, out)
}

func (s *countingStore) misses() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.reads
	s.reads = 0
	return n
}

func entries(from, to uint64, size int) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, size)})
	}
	return out
}

// cached reports which of indexes lo..hi the cache answers from memory,
// checking each answer, from memory or the store, against what was
// written.
func cached(t *testing.T, c *logCache, s *countingStore, lo, hi uint64) []uint64 {
	t.Helper()
	var hits []uint64
	for i := lo; i <= hi; i++ {
		s.misses()
		var l raft.Log
		if err := c.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if l.Index != i || len(l.Data) == 0 || l.Data[0] != byte(i) {
			t.Fatalf("GetLog(%d) read entry %d", i, l.Index)
		}
		if s.misses() == 0 {
			hits = append(hits, i)
		}
	}
	return hits
}

func span(lo, hi uint64) []uint64 {
	var out []uint64
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

// The cache keeps the most recent entries up to its count and its bytes,
// whichever comes first, answers them from memory and every other from
// the store; a compaction drops only the prefix it deletes, a truncated
// suffix (a follower's conflict) clears it. raft.LogCache kept 512
// entries whatever their size: a group's entries of thousands of checks
// of long keys are megabytes each.
func TestLogCache(t *testing.T) {
	s := &countingStore{InmemStore: raft.NewInmemStore()}
	c := newLogCache(s, 4, 3*(100+entryOverhead)+10)
	if err := c.StoreLogs(entries(1, 6, 10)); err != nil {
		t.Fatal(err)
	}
	if got := cached(t, c, s, 1, 6); fmt.Sprint(got) != fmt.Sprint(span(3, 6)) {
		t.Fatalf("by count: cached %v, want 3..6", got)
	}
	if err := c.StoreLogs(entries(7, 7, 300)); err != nil { // with 4, 5 and 6, over the bytes
		t.Fatal(err)
	}
	if got := cached(t, c, s, 1, 7); fmt.Sprint(got) != fmt.Sprint(span(6, 7)) {
		t.Fatalf("by bytes: cached %v, want 6..7", got)
	}
	if err := c.StoreLog(entries(8, 8, 2000)[0]); err != nil { // larger than the cache
		t.Fatal(err)
	}
	if got := cached(t, c, s, 1, 8); len(got) != 0 || c.bytes != 0 {
		t.Fatalf("an entry over the bytes: cached %v (%d bytes), want none", got, c.bytes)
	}
	if err := c.StoreLogs(entries(9, 12, 10)); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteRange(1, 10); err != nil { // a compaction
		t.Fatal(err)
	}
	if got := cached(t, c, s, 11, 12); fmt.Sprint(got) != fmt.Sprint(span(11, 12)) {
		t.Fatalf("after a compaction: cached %v, want 11..12", got)
	}
	if err := c.DeleteRange(12, 12); err != nil { // a conflicting suffix
		t.Fatal(err)
	}
	if err := c.StoreLogs(entries(12, 13, 10)); err != nil {
		t.Fatal(err)
	}
	if got := cached(t, c, s, 11, 13); fmt.Sprint(got) != fmt.Sprint(span(12, 13)) {
		t.Fatalf("after a truncation: cached %v, want 12..13", got)
	}
	if err := c.StoreLogs(entries(20, 20, 10)); err != nil { // not the next index
		t.Fatal(err)
	}
	if got := cached(t, c, s, 20, 20); len(got) != 1 || c.n != 1 {
		t.Fatalf("after a gap: cached %v (%d entries), want 20 alone", got, c.n)
	}
	var want int64
	for i := range c.ring {
		if c.ring[i] != nil {
			want += entrySize(c.ring[i])
		}
	}
	if c.bytes != want {
		t.Fatalf("counts %d bytes, holds %d", c.bytes, want)
	}
}

// Replication reads while the leader writes: the cache is safe to share.
func TestLogCacheConcurrent(t *testing.T) {
	s := &countingStore{InmemStore: raft.NewInmemStore()}
	c := newLogCache(s, 64, 64<<10)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := uint64(1); i <= 2000; i += 10 {
			if err := c.StoreLogs(entries(i, i+9, 50)); err != nil {
				t.Error(err)
				return
			}
			if i%200 == 1 && i > 1 {
				if err := c.DeleteRange(1, i-100); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			for range 5000 {
				last, _ := c.LastIndex()
				if last == 0 {
					continue
				}
				var l raft.Log
				if err := c.GetLog(last, &l); err == nil && l.Index != last {
					t.Errorf("GetLog(%d) read %d", last, l.Index)
					return
				}
			}
		})
	}
	wg.Wait()
}
