package raftlog

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/hashicorp/raft"
)

// countingOps counts fsyncs and can hold one in progress.
type countingOps struct {
	syncs atomic.Int64
	hold  atomic.Pointer[chan chan struct{}] // when set, a flush sends here and waits to be released
	fail  atomic.Pointer[error]
}

func (c *countingOps) ops() fileOps {
	d := defaultFileOps()
	return fileOps{
		write:    d.write,
		allocate: d.allocate,
		sync: func(f *os.File) error {
			c.syncs.Add(1)
			if e := c.fail.Load(); e != nil {
				return *e
			}
			if hold := c.hold.Load(); hold != nil {
				release := make(chan struct{})
				*hold <- release
				<-release
			}
			return d.sync(f)
		},
	}
}

// While one flush is in progress, writers from 63 other groups arrive;
// they all share the next flush: two fsyncs for 64 writes.
func TestGroupCommitSharesOneSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &countingOps{}
		s, err := openWith(t.TempDir(), Options{}, c.ops())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		hold := make(chan chan struct{})
		c.hold.Store(&hold)
		base := c.syncs.Load() // creating the first segment syncs it
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		store := func(g int) {
			defer wg.Done()
			name := fmt.Sprintf("shard-%d", g)
			errs <- s.Group(name).StoreLog(entry(name, 1, 1))
		}
		wg.Add(1)
		go store(0)
		release := <-hold // the first flush is in progress
		for g := 1; g < 64; g++ {
			wg.Add(1)
			go store(g)
		}
		synctest.Wait() // every writer is queued behind it
		if got := s.Stats().Writes; got != 0 {
			t.Fatalf("writes before the first flush ended = %d", got)
		}
		c.hold.Store(nil)
		close(release)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := c.syncs.Load() - base; got != 2 {
			t.Fatalf("fsyncs = %d; want 2 (one in progress, one for the 63 that waited)", got)
		}
		st := s.Stats()
		if st.Writes != 2 || st.Records != 64 || st.Syncs != 2 {
			t.Fatalf("stats = %+v", st)
		}
		for g := range 64 {
			name := fmt.Sprintf("shard-%d", g)
			m := newModel()
			m.store([]*raft.Log{entry(name, 1, 1)})
			checkGroup(t, s.Group(name), m)
		}
	})
}

// StoreLogs returns only after its fsync: a writer blocked in the flush is
// not answered, and its entries are not visible, until it ends.
func TestStoreLogsWaitsForSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &countingOps{}
		s, err := openWith(t.TempDir(), Options{}, c.ops())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		hold := make(chan chan struct{})
		c.hold.Store(&hold)
		done := make(chan error)
		go func() { done <- s.Group("g").StoreLog(entry("g", 1, 1)) }()
		release := <-hold
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("StoreLog returned (%v) before its fsync ended", err)
		default:
		}
		if l, _ := s.Group("g").LastIndex(); l != 0 {
			t.Fatalf("entry visible before it is durable: LastIndex = %d", l)
		}
		c.hold.Store(nil)
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if l, _ := s.Group("g").LastIndex(); l != 1 {
			t.Fatalf("LastIndex = %d", l)
		}
	})
}

func TestNoSyncSkipsFsync(t *testing.T) {
	c := &countingOps{}
	dir := t.TempDir()
	s, err := openWith(dir, Options{NoSync: true}, c.ops())
	if err != nil {
		t.Fatal(err)
	}
	base := c.syncs.Load()
	for i := uint64(1); i <= 10; i++ {
		if err := s.Group("g").StoreLog(entry("g", i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.syncs.Load() - base; got != 0 {
		t.Fatalf("fsyncs with NoSync = %d", got)
	}
	s.Close()
	m := newModel()
	m.store(entries("g", 1, 10, 1))
	checkGroup(t, openT(t, dir, Options{}).Group("g"), m)
}

// A failed fsync fails the store for good: the page cache may no longer
// match the disk, so nothing after it may be acknowledged. A restart
// replays what is on disk.
func TestFailedSyncIsSticky(t *testing.T) {
	c := &countingOps{}
	dir := t.TempDir()
	s, err := openWith(dir, Options{}, c.ops())
	if err != nil {
		t.Fatal(err)
	}
	g := s.Group("g")
	if err := g.StoreLog(entry("g", 1, 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Failed():
		t.Fatal("Failed closed before any failure")
	default:
	}
	if s.Err() != nil {
		t.Fatalf("Err = %v before any failure", s.Err())
	}
	eio := errors.New("input/output error")
	c.fail.Store(&eio)
	if err := g.StoreLog(entry("g", 2, 1)); !errors.Is(err, eio) {
		t.Fatalf("StoreLog with a failing fsync = %v", err)
	}
	// The node learns at once that its log is gone, to stop.
	select {
	case <-s.Failed():
	default:
		t.Fatal("Failed not closed after a failed fsync")
	}
	if !errors.Is(s.Err(), eio) {
		t.Fatalf("Err = %v", s.Err())
	}
	c.fail.Store(nil)
	for name, call := range map[string]func() error{
		"StoreLog":    func() error { return g.StoreLog(entry("g", 2, 1)) },
		"DeleteRange": func() error { return g.DeleteRange(1, 1) },
		"Set":         func() error { return g.Set([]byte("k"), []byte("v")) },
		"other group": func() error { return s.Group("h").StoreLog(entry("h", 1, 1)) },
		"Drop":        func() error { return s.Drop("h") },
	} {
		if err := call(); !errors.Is(err, eio) {
			t.Errorf("%s after a failed fsync = %v", name, err)
		}
	}
	if l, _ := g.LastIndex(); l != 1 {
		t.Fatalf("LastIndex = %d: the failed write is visible", l)
	}
	s.Close()
	// The failed write did reach the file here, so it is replayed, like
	// a write a crash interrupts after it is written but before it is
	// acknowledged: raft takes either outcome.
	g = openT(t, dir, Options{}).Group("g")
	if l, _ := g.LastIndex(); l != 2 {
		t.Fatalf("LastIndex after reopen = %d", l)
	}
}

func TestClosed(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := s.Group("g")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if err := g.StoreLog(entry("g", 1, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("StoreLog after Close = %v", err)
	}
}

// Many groups write, read and truncate at once (run with -race), as a
// node's raft groups do: each group's appends come from one goroutine and
// its head truncations from another (raft's snapshot goroutine).
func TestConcurrentGroups(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SegmentSize: 16 << 10, MaxSegments: 3})
	const groups, n = 16, 200
	var wg sync.WaitGroup
	models := make([]*model, groups)
	for gi := range groups {
		name := fmt.Sprintf("g%d", gi)
		g := s.Group(name)
		m := newModel()
		models[gi] = m
		truncate := make(chan uint64, n)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(truncate)
			for i := uint64(1); i <= n; i += 2 {
				ls := entries(name, i, i+1, 1)
				if err := g.StoreLogs(ls); err != nil {
					t.Error(err)
					return
				}
				m.store(ls)
				var l raft.Log
				if err := g.GetLog(i+1, &l); err != nil {
					t.Error(err)
					return
				}
				if i%20 == 1 && i > 40 {
					truncate <- i - 40
				}
			}
		}()
		go func() {
			defer wg.Done()
			for upto := range truncate {
				if err := g.DeleteRange(0, upto); err != nil {
					t.Error(err)
				}
				if f, _ := g.FirstIndex(); f <= upto {
					t.Errorf("%s: FirstIndex %d after truncating to %d", name, f, upto)
				}
			}
		}()
	}
	wg.Wait()
	s.Close()
	s = openT(t, dir, Options{})
	for gi, m := range models {
		g := s.Group(fmt.Sprintf("g%d", gi))
		f, _ := g.FirstIndex()
		m.deleteRange(0, f-1) // the truncations the goroutines made
		checkGroup(t, g, m)
	}
}

// viaFlusher makes the flusher goroutine write l to group: a first store
// writes inline and is held in its fsync while l queues behind it, so the
// inline writer hands l to the flusher. It returns once both are answered.
func viaFlusher(t *testing.T, s *Store, c *countingOps, group string, l *raft.Log) {
	t.Helper()
	hold := make(chan chan struct{})
	c.hold.Store(&hold)
	first := make(chan error, 1)
	go func() { first <- s.Group("inline").StoreLog(entry("inline", 1, 1)) }()
	release := <-hold // the inline writer is in its fsync
	second := make(chan error, 1)
	go func() { second <- s.Group(group).StoreLog(l) }()
	synctest.Wait() // l queued: the inline writer hands it to the flusher
	c.hold.Store(nil)
	close(release)
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}

// A record queued just as the flusher finds nothing left is still written:
// its caller saw a writer at work and waits for it, so the flusher must
// not let go without looking again (a lost wakeup hung the property test).
func TestRecordQueuedAsFlusherStopsIsWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &countingOps{}
		s, err := openWith(t.TempDir(), Options{}, c.ops())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		late := make(chan error, 1)
		var once sync.Once
		s.beforeRelease = func() {
			once.Do(func() {
				go func() { late <- s.Group("late").StoreLog(entry("late", 1, 1)) }()
				synctest.Wait() // queued behind the flusher, which still writes
			})
		}
		viaFlusher(t, s, c, "b", entry("b", 1, 1))
		if err := <-late; err != nil {
			t.Fatal(err)
		}
		m := newModel()
		m.store([]*raft.Log{entry("late", 1, 1)})
		checkGroup(t, s.Group("late"), m)
	})
}

// The flusher does the housekeeping its last write calls for before it
// lets go: a write that fills the segment starts the next one at once, not
// at some later commit.
func TestFlusherRotatesAfterItsLastWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &countingOps{}
		dir := t.TempDir()
		s, err := openWith(dir, Options{SegmentSize: 1024}, c.ops())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		big := entry("b", 1, 1)
		big.Data = append(big.Data, make([]byte, 2048)...)
		viaFlusher(t, s, c, "b", big)
		synctest.Wait() // the flusher is done
		if got := len(segFiles(t, dir)); got != 2 {
			t.Fatalf("%d segment files after a write past the segment size; want 2 (rotated)", got)
		}
	})
}
