package cluster

import (
	"os"
	"sync"
)

// syncable is a store whose writes reach the disk only when Sync is called
// (raft-boltdb/v2 opened with NoSync).
type syncable interface {
	Sync() error
}

// Syncer is the node's group commit for durability. Each of a node's Raft
// groups keeps its log in its own raft-boltdb/v2 file; fsyncing each file
// on every write would cost every group a disk flush per batch, and with
// dozens of groups on one disk that, not CPU, caps throughput (measured
// here: 64 groups, 3 nodes: 1.4k entries/s with per-write fsync, 4.4k with
// this). So stores are opened without sync and each write waits here
// instead: writers that arrive while a flush runs share the next one, and
// when several stores wait, one syncfs(2) flushes them all (Linux; other
// systems sync each store).
type Syncer struct {
	dir *os.File // any file on the data volume, for syncfs

	mu      sync.Mutex
	pending map[syncable][]chan error
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// NewSyncer starts a syncer for stores under dataDir.
func NewSyncer(dataDir string) (*Syncer, error) {
	d, err := os.Open(dataDir)
	if err != nil {
		return nil, err
	}
	s := &Syncer{
		dir:     d,
		pending: map[syncable][]chan error{},
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go s.loop()
	return s, nil
}

// Sync returns once everything st wrote before the call is on disk.
func (s *Syncer) Sync(st syncable) error {
	ch := make(chan error, 1)
	s.mu.Lock()
	s.pending[st] = append(s.pending[st], ch)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	select {
	case err := <-ch:
		return err
	case <-s.done:
		return os.ErrClosed
	}
}

func (s *Syncer) loop() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		}
		s.mu.Lock()
		batch := s.pending
		s.pending = make(map[syncable][]chan error, len(batch))
		s.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		var err error
		if len(batch) > 1 && haveSyncFS {
			err = syncFS(s.dir)
		} else {
			err = s.syncEach(batch)
		}
		for _, chs := range batch {
			for _, ch := range chs {
				ch <- err
			}
		}
	}
}

// syncEach flushes each store of batch in parallel.
func (s *Syncer) syncEach(batch map[syncable][]chan error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for st := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := st.Sync(); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// Close stops the syncer; waiting writers get an error.
func (s *Syncer) Close() error {
	close(s.stop)
	<-s.done
	return s.dir.Close()
}
