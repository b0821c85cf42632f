package raftlog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// benchGroups is how many groups write at once: a node's shards.
const benchGroups = 64

// benchEntry is a small entry, the size of a strict check's.
func benchEntry(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{'x'}, 100), AppendedAt: time.Now()}
}

// runGroups has benchGroups goroutines share b.N StoreLogs of one entry,
// each on its own group, and reports ns per StoreLogs.
func runGroups(b *testing.B, stores []raft.LogStore) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := range benchGroups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(1); next.Add(1) <= int64(b.N); i++ {
				if err := stores[g].StoreLogs([]*raft.Log{benchEntry(i)}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
}

// BenchmarkStoreLogs64Groups: one small entry per StoreLogs from 64
// concurrent groups, on this log and on today's raft-boltdb/v2 files
// (one per group) fsyncing each commit (--fsync=always) or sharing
// syncfs(2) flushes (--fsync=batch, cluster.Syncer's scheme).
//
//	go test -run '^$' -bench StoreLogs64Groups -benchtime 4000x ./raftlog/
func BenchmarkStoreLogs64Groups(b *testing.B) {
	b.Run("raftlog", func(b *testing.B) { benchRaftlog(b, Options{}) })
	b.Run("raftlog-nosync", func(b *testing.B) { benchRaftlog(b, Options{NoSync: true}) })
	b.Run("boltdb-fsync", func(b *testing.B) { benchBolt(b, false) })
	b.Run("boltdb-syncfs", func(b *testing.B) { benchBolt(b, true) })
}

func benchRaftlog(b *testing.B, opts Options) {
	s, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	stores := make([]raft.LogStore, benchGroups)
	for g := range stores {
		stores[g] = s.Group(fmt.Sprint("shard-", g))
	}
	runGroups(b, stores)
	st := s.Stats()
	b.ReportMetric(float64(st.Syncs)/float64(b.N), "fsyncs/op")
	b.ReportMetric(float64(st.Records)/float64(st.Writes), "records/write")
}

func benchBolt(b *testing.B, shared bool) {
	dir := b.TempDir()
	var syncer *fsSyncer
	if shared {
		syncer = newFSSyncer(dir)
		defer syncer.close()
	}
	stores := make([]raft.LogStore, benchGroups)
	for g := range stores {
		bs, err := raftboltdb.New(raftboltdb.Options{
			Path:        filepath.Join(dir, fmt.Sprint(g, ".db")),
			NoSync:      shared,
			BoltOptions: &bbolt.Options{NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
		})
		if err != nil {
			b.Fatal(err)
		}
		defer bs.Close()
		stores[g] = bs
		if shared {
			stores[g] = &syncedBolt{bs, syncer}
		}
	}
	runGroups(b, stores)
	if shared {
		b.ReportMetric(float64(syncer.syncs.Load())/float64(b.N), "fsyncs/op")
	} else {
		b.ReportMetric(2, "fsyncs/op") // bbolt: fdatasync after the pages, again after the meta page
	}
}

// syncedBolt waits for a shared flush after each write, as cluster's
// syncedStore does.
type syncedBolt struct {
	*raftboltdb.BoltStore
	s *fsSyncer
}

func (b *syncedBolt) StoreLogs(logs []*raft.Log) error {
	if err := b.BoltStore.StoreLogs(logs); err != nil {
		return err
	}
	return b.s.wait()
}

// fsSyncer is cluster.Syncer's scheme reduced to what the benchmark needs:
// writers that arrive during a syncfs(2) share the next one.
type fsSyncer struct {
	dir     *os.File
	mu      sync.Mutex
	waiting []chan error
	kick    chan struct{}
	stop    chan struct{}
	syncs   atomic.Int64
}

func newFSSyncer(dir string) *fsSyncer {
	d, _ := os.Open(dir)
	s := &fsSyncer{dir: d, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	go func() {
		for {
			select {
			case <-s.stop:
				return
			case <-s.kick:
			}
			s.mu.Lock()
			w := s.waiting
			s.waiting = nil
			s.mu.Unlock()
			if len(w) == 0 {
				continue
			}
			s.syncs.Add(1)
			err := unix.Syncfs(int(s.dir.Fd()))
			for _, ch := range w {
				ch <- err
			}
		}
	}()
	return s
}

func (s *fsSyncer) wait() error {
	ch := make(chan error, 1)
	s.mu.Lock()
	s.waiting = append(s.waiting, ch)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return <-ch
}

func (s *fsSyncer) close() { close(s.stop); s.dir.Close() }

// BenchmarkGetLog reads entries back from the segment (a raft.LogCache
// miss): the price of keeping 12 bytes an entry in memory instead of the
// entry.
func BenchmarkGetLog(b *testing.B) {
	s, err := Open(b.TempDir(), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	g := s.Group("g")
	const n = 2048
	for i := uint64(1); i <= n; i += 64 {
		var ls []*raft.Log
		for j := i; j < i+64; j++ {
			ls = append(ls, benchEntry(j))
		}
		if err := g.StoreLogs(ls); err != nil {
			b.Fatal(err)
		}
	}
	var l raft.Log
	b.ResetTimer()
	for i := range b.N {
		if err := g.GetLog(uint64(i%n)+1, &l); err != nil {
			b.Fatal(err)
		}
	}
}
