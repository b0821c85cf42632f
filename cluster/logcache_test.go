package cluster

import (
	"bytes"
	"fmt"
	"math/rand/v2"
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
				if last < 20 {
					continue
				}
				i := last - uint64(rand.IntN(20)) // cached, or just dropped
				var l raft.Log
				if err := c.GetLog(i, &l); err == nil && l.Index != i {
					t.Errorf("GetLog(%d) read %d", i, l.Index)
					return
				}
			}
		})
	}
	wg.Wait()
}

// The cache keeps its own copy of each entry, never the one raft gave it:
// a leader's is a field of its future, which holds the state machine's
// answer, and a follower's an element of its whole AppendEntries batch.
// Kept, 300 small entries on a leader held 79 MB where the cache counted
// 59 KB, and a follower's cache counting 16 MB held 24 MB.
func TestLogCacheKeepsNoEntryOfRaft(t *testing.T) {
	c := newLogCache(raft.NewInmemStore(), 8, 1<<20)
	batch := make([]raft.Log, 2)
	batch[0] = raft.Log{Index: 1, Term: 1, Data: []byte("a")}
	batch[1] = raft.Log{Index: 2, Term: 1, Data: []byte("b")}
	if err := c.StoreLogs([]*raft.Log{&batch[0], &batch[1]}); err != nil {
		t.Fatal(err)
	}
	for _, l := range c.ring {
		if l == &batch[0] || l == &batch[1] {
			t.Fatal("the cache keeps the entry raft gave it")
		}
	}
}

// Any appends (anywhere, as a follower's after a conflict), compactions,
// truncations and deletes in the middle: every entry the cache holds is
// the store's.
func TestLogCacheMatchesTheStore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 300 {
		s := raft.NewInmemStore()
		c := newLogCache(s, 1+rng.IntN(8), int64(entryOverhead*(1+rng.IntN(10))+rng.IntN(200)))
		term := uint64(0)
		for op := range 200 {
			first, _ := s.FirstIndex()
			last, _ := s.LastIndex()
			if rng.IntN(2) == 0 {
				start := last + 1
				if rng.IntN(4) == 0 && last > 0 {
					start = 1 + uint64(rng.IntN(int(last)+3))
				}
				var ls []*raft.Log
				for i := range 1 + rng.IntN(5) {
					term++
					ls = append(ls, &raft.Log{Index: start + uint64(i), Term: term, Data: make([]byte, rng.IntN(60))})
				}
				if err := c.StoreLogs(ls); err != nil {
					t.Fatal(err)
				}
			} else if last > 0 {
				lo := first + uint64(rng.IntN(int(last-first)+1))
				hi := lo + uint64(rng.IntN(int(last-lo)+2))
				if rng.IntN(3) == 0 {
					lo = first
				}
				if rng.IntN(5) == 0 && lo > 1 {
					lo--
				}
				if err := c.DeleteRange(lo, hi); err != nil {
					t.Fatal(err)
				}
			}
			for i := range c.n {
				idx := c.first + uint64(i)
				var st raft.Log
				cl := c.ring[idx%uint64(len(c.ring))]
				if cl == nil || cl.Index != idx || s.GetLog(idx, &st) != nil || st.Term != cl.Term {
					t.Fatalf("run %d op %d: cached %d (%v), the store's %+v", run, op, idx, cl, st)
				}
			}
		}
	}
}
