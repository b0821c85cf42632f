package raftlog

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Errors a store returns.
var (
	// ErrCorrupt: the log on disk is damaged somewhere other than a torn
	// last write; it cannot be trusted.
	ErrCorrupt = errors.New("raftlog: log corrupt")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("raftlog: store closed")
	// ErrDropped: the group was dropped; open it again with Store.Group.
	ErrDropped = errors.New("raftlog: group dropped")
	// ErrKeyNotFound is Get's answer for a key never set. Its text is
	// "not found" because that is what hashicorp/raft checks for.
	ErrKeyNotFound = errors.New("not found")
)

// Options tune a Store. The zero value is a durable store with defaults.
type Options struct {
	// NoSync skips fsync: writes reach the disk when the OS flushes them
	// (--fsync=off, throwaway clusters). A process crash still loses
	// nothing; a power cut loses recent writes.
	NoSync bool
	// SegmentSize is the size past which the log moves to a new segment
	// (default 64 MiB; at most 1 GiB).
	SegmentSize int64
	// MaxSegments is how many segments may be kept before the groups that
	// pin the oldest are rewritten so it can go (default 4).
	MaxSegments int
	// MaxSyncDuration fails the log (Failed, ErrStalled) once a write or
	// fsync has not returned for this long: a hung disk (stall.go). 0:
	// not watched.
	MaxSyncDuration time.Duration
}

const (
	defaultSegmentSize = 64 << 20
	maxSegmentSize     = 1 << 30
	defaultMaxSegments = 4
)

// Stats counts a store's work since Open.
type Stats struct {
	Records uint64 // records written
	Writes  uint64 // write calls: each carries one or more records
	Syncs   uint64 // fsyncs of segments (not counting rotation)
	Bytes   uint64 // bytes written
}

// Store is a node's Raft log: one append-only log shared by all its groups.
// It is safe for concurrent use.
type Store struct {
	dir  string
	opts Options
	ops  fileOps

	// mu guards groups, handles and segs; only the flusher (and replay)
	// changes groups and segs, so it reads them without mu.
	mu      sync.RWMutex
	groups  map[string]*groupState
	handles map[string]*Group
	segs    []*segment // oldest first; the last one is written

	qmu    sync.Mutex
	queue  []*op
	failed error // sticky: a write or fsync failed
	// failedCh is closed when failed is set.
	failedCh chan struct{}
	closed   bool
	flushing bool       // a goroutine is writing (flush.go)
	idle     *sync.Cond // on qmu: signalled when flushing ends

	beforeRelease func() // tests: runs in the flusher after an empty round, before it lets go

	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	nRecords, nWrites, nSyncs, nBytes atomic.Uint64
}

// op is one record waiting to be written.
type op struct {
	rec  []byte
	r    record // rec decoded, applied once rec is durable
	done chan error
}

// Open opens (creating) the log in dir, replaying what is there.
func Open(dir string, opts Options) (*Store, error) {
	return openWith(dir, opts, defaultFileOps())
}

func openWith(dir string, opts Options, ops fileOps) (*Store, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = defaultSegmentSize
	}
	opts.SegmentSize = min(opts.SegmentSize, maxSegmentSize)
	if opts.MaxSegments <= 1 {
		opts.MaxSegments = defaultMaxSegments
	}
	if err := mkdirDurable(dir, syncDir); err != nil {
		return nil, err
	}
	s := &Store{
		dir:      dir,
		opts:     opts,
		ops:      ops,
		groups:   map[string]*groupState{},
		handles:  map[string]*Group{},
		kick:     make(chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		failedCh: make(chan struct{}),
	}
	s.idle = sync.NewCond(&s.qmu)
	if err := s.replay(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if opts.MaxSyncDuration > 0 {
		// After replay: a node still starting leads nothing, and a disk
		// that hangs then hangs its start, which says so plainly.
		w := &stallWatch{}
		s.ops = w.watched(s.ops)
		go s.watchStalls(w, opts.MaxSyncDuration)
	}
	go s.flusher()
	return s, nil
}

// Group returns the log and stable store of the named group (the same one
// for the same name until Drop).
func (s *Store) Group(name string) *Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.handles[name]
	if g == nil {
		g = &Group{s: s, name: name}
		s.handles[name] = g
	}
	return g
}

// Groups returns the names of the groups with entries or stable keys in
// the log, sorted: after a restart, the replicas this node held.
func (s *Store) Groups() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.groups))
	for n := range s.groups {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Drop deletes a group (its replica moved away): its entries and keys are
// forgotten, durably, and its handle answers ErrDropped from then on.
func (s *Store) Drop(name string) error {
	g := s.Group(name)
	g.opMu.Lock()
	defer g.opMu.Unlock()
	err := s.commit(encodeDrop(name), record{typ: recDrop, group: name})
	s.mu.Lock()
	g.dropped = true
	if s.handles[name] == g {
		delete(s.handles, name)
	}
	s.mu.Unlock()
	return err
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{
		Records: s.nRecords.Load(),
		Writes:  s.nWrites.Load(),
		Syncs:   s.nSyncs.Load(),
		Bytes:   s.nBytes.Load(),
	}
}

// Close writes what is queued, then closes the files. Calls after Close
// return ErrClosed.
func (s *Store) Close() error {
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return nil
	}
	s.closed = true
	for s.flushing { // what was queued before Close is written
		s.idle.Wait()
	}
	s.qmu.Unlock()
	close(s.stop)
	<-s.done
	// A clean stop leaves the last segment ending at its last record, as
	// if nothing had been preallocated (replay copes with either).
	s.qmu.Lock()
	failed := s.failed
	s.qmu.Unlock()
	var err error
	if len(s.segs) > 0 && failed == nil {
		err = s.active().trim()
	}
	if cerr := s.closeFiles(); err == nil {
		err = cerr
	}
	return err
}

func (s *Store) closeFiles() error {
	var first error
	for _, seg := range s.segs {
		if err := seg.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// commit queues a record and returns once it is durable and applied.
func (s *Store) commit(rec []byte, r record) error {
	if len(rec) > recHeaderSize+int(payloadLimit) {
		// Replay would take its header for damage.
		return fmt.Errorf("raftlog: %s: record of %d bytes is over the %d-byte limit", r.group, len(rec), recHeaderSize+int(payloadLimit))
	}
	o := &op{rec: rec, r: r, done: make(chan error, 1)}
	s.qmu.Lock()
	switch {
	case s.failed != nil:
		s.qmu.Unlock()
		return s.failed
	case s.closed:
		s.qmu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, o)
	if s.flushing {
		s.qmu.Unlock() // the writer takes it in its next round
		return <-o.done
	}
	s.flushing = true
	s.qmu.Unlock()
	s.flushInline()
	return <-o.done
}

// fail makes err the answer to every later call.
func (s *Store) fail(err error) error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.failed == nil {
		s.failed = fmt.Errorf("raftlog: log unusable after a failed or hung write (restart to replay it): %w", err)
		close(s.failedCh)
	}
	return s.failed
}

// Failed is closed once a write or fsync has failed (a full or failing
// disk): every later call then answers Err, and since Raft cannot go on
// without its log, the process using it should stop.
func (s *Store) Failed() <-chan struct{} { return s.failedCh }

// Err is the failure that made the log unusable (nil while it is not).
func (s *Store) Err() error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return s.failed
}

// active is the segment being written.
func (s *Store) active() *segment { return s.segs[len(s.segs)-1] }

// segment returns the open segment seq; the caller holds mu.
func (s *Store) segment(seq uint32) *segment {
	i, ok := slices.BinarySearchFunc(s.segs, seq, func(sg *segment, seq uint32) int {
		return int(int64(sg.seq) - int64(seq))
	})
	if !ok {
		return nil
	}
	return s.segs[i]
}
