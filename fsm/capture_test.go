package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/test/proptest"
	"github.com/floodgate/floodgate/window"
)

// stopTheWorld is the reference snapshot: every state encoded at once
// under the lock, as a capture must see them at its point in time. It
// trims aged parts of the states it reads, so tests take it of a twin
// that applied the same log, not of the shard whose capture they check.
func stopTheWorld(t *testing.T, s *Shard) []byte {
	t.Helper()
	s.mu.Lock()
	snap := &shardSnapshot{now: s.now}
	if s.own != nil {
		snap.own = appendOwnership(nil, s.own)
	}
	s.tab.each(func(r *record) {
		if r.expiry() <= s.now || s.tab.counts != nil && s.tab.counts.orphan(r.id) {
			return
		}
		l, _ := shapeOf(r.id)
		l.Check(&r.st, s.now, 0)
		snap.addEncoded(r.id, l.AppendState(nil, &r.st))
	})
	s.mu.Unlock()
	var w sliceWriter
	if err := snap.writeTo(&w); err != nil {
		t.Fatal(err)
	}
	return w
}

// stepCapture runs up to budget records of s's attached capture's pass,
// as Persist does between applies.
func stepCapture(s *Shard, budget int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.tab.caps {
		c.step(budget)
	}
}

// persist writes snap to memory and releases it, as raft does to a file.
func persist(t *testing.T, snap raft.FSMSnapshot) []byte {
	t.Helper()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return sink.Bytes()
}

// TestCaptureKeepsItsPointInTime takes snapshots in the middle of random
// logs (every algorithm and mode, resets, fast hits, restores, ticks,
// time jumps past every window, so states expire, are swept and their
// records reused) and keeps applying, and exporting, while the capture's
// pass advances in random steps. Each snapshot must be byte for byte what encoding every
// state at once at its point in time writes, and the capturing replica
// must answer, and end, exactly as a twin that never snapshotted.
func TestCaptureKeepsItsPointInTime(t *testing.T) {
	forSeeds(t, 12, func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 7))
		logs := randomLogOver(seed+100, 1500, 300)
		// Now and then a restore of another log's states (it removes
		// and inserts records) instead of an entry.
		for i := range logs {
			if r.IntN(40) == 0 {
				logs[i] = &raft.Log{Index: logs[i].Index, Type: raft.LogCommand,
					Data: EncodeRestore(exportOf(randomLogOver(seed+uint64(i), 1, 300)[0].Data))}
			}
		}
		a, twin := NewShard(), NewShard()
		var snap raft.FSMSnapshot
		var want []byte
		captured := 0
		for i, l := range logs {
			if snap == nil && r.IntN(60) == 0 {
				want = stopTheWorld(t, twin)
				var err error
				if snap, err = a.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
			ra, rt := a.Apply(l), twin.Apply(l)
			if fmt.Sprint(ra) != fmt.Sprint(rt) {
				t.Fatalf("entry %d: the capturing replica answered %v, its twin %v", i, ra, rt)
			}
			if snap != nil {
				if r.IntN(20) == 0 {
					// A backup reads every state (trimming them) meanwhile.
					if _, err := a.ExportAll(); err != nil {
						t.Fatal(err)
					}
				}
				stepCapture(a, r.IntN(40))
				if r.IntN(50) == 0 {
					if got := persist(t, snap); !bytes.Equal(got, want) {
						t.Fatalf("entry %d: the snapshot differs from its point in time", i)
					}
					snap = nil
					captured++
				}
			}
		}
		if captured < 3 {
			t.Fatalf("only %d snapshots were checked", captured)
		}
		if !bytes.Equal(stopTheWorld(t, a), stopTheWorld(t, twin)) {
			t.Fatal("the capturing replica ended unlike its twin")
		}
	})
}

// forSeeds runs run in parallel subtests, one per seed: n of them, fewer
// under -race or -short (proptest.Runs).
func forSeeds(t *testing.T, n int, run func(t *testing.T, seed uint64)) {
	for seed := range uint64(proptest.Runs(n)) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			run(t, seed)
		})
	}
}

// manyKeys fills a shard with n fixed-window states of one second at ts.
func manyKeys(s *Shard, index uint64, ts int64, prefix string, n int) {
	p := inline(window.Limit{Algorithm: window.FixedWindow, Limit: 5, Window: sec})
	var checks []Check
	for i := range n {
		checks = append(checks, Check{Key: fmt.Sprintf("%s%d", prefix, i), Policy: p, Cost: 1})
	}
	s.Apply(allowLog(index, ts, checks...))
}

// A capture's bookmarks are record numbers: the table must not move
// records while one is attached, and new states that reuse freed records
// are not part of it. Compaction resumes once it is done.
func TestCaptureDefersCompaction(t *testing.T) {
	s := NewShard()
	ts := int64(1_700_000_000) * sec
	manyKeys(s, 1, ts, "old", 20_000)
	want := stopTheWorld(t, s)
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Everything expires and is swept; new keys reuse the freed records.
	for i := range 30 {
		s.Apply(&raft.Log{Index: uint64(2 + i), Type: raft.LogCommand, Data: EncodeTick(ts + 10*sec + int64(i))})
	}
	if got := s.Stats().States; got != 0 {
		t.Fatalf("%d states after everything expired", got)
	}
	used := s.tab.used
	if used < 20_000 {
		t.Fatalf("the table compacted under a capture: %d record numbers", used)
	}
	manyKeys(s, 40, ts+11*sec, "new", 500)
	if got := persist(t, snap); !bytes.Equal(got, want) {
		t.Fatal("the snapshot differs from its point in time")
	}
	for i := range 30 {
		s.Apply(&raft.Log{Index: uint64(50 + i), Type: raft.LogCommand, Data: EncodeTick(ts + 11*sec + int64(i))})
	}
	if s.tab.used >= used {
		t.Fatalf("no compaction after the capture: %d record numbers, %d before", s.tab.used, used)
	}
	if got := s.Stats().States; got != 500 {
		t.Fatalf("%d states, want the 500 new ones", got)
	}
}

// Snapshot encodes nothing and each step of the pass at most captureStep
// records: what bounds how long an apply waits for a snapshot.
func TestCaptureHoldsTheLockBriefly(t *testing.T) {
	s := NewShard()
	manyKeys(s, 1, int64(1_700_000_000)*sec, "k", 3*captureStep)
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	c := snap.(*liveSnapshot).c
	if len(c.snap.entries) != 0 {
		t.Fatalf("Snapshot encoded %d states", len(c.snap.entries))
	}
	for i := 1; i <= 3; i++ {
		if over := c.step(captureStep); over != (i == 3) {
			t.Fatalf("step %d: over %v", i, over)
		}
		if got := len(c.snap.entries); got != i*captureStep {
			t.Fatalf("step %d: %d states encoded, want %d", i, got, i*captureStep)
		}
	}
	snap.Release()
}

// Persist after Release fails (the capture stopped keeping what applies
// changed); Release alone detaches it.
func TestCaptureReleased(t *testing.T) {
	s := NewShard()
	manyKeys(s, 1, int64(1_700_000_000)*sec, "k", 2*captureStep)
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if len(s.tab.caps) != 0 {
		t.Fatal("a released capture is still attached")
	}
	var sink memSink
	if err := snap.Persist(&sink); !errors.Is(err, errReleased) || !sink.cancelled {
		t.Fatalf("Persist after Release: %v (cancelled %v)", err, sink.cancelled)
	}
}

// Snapshots taken while earlier ones are neither persisted nor released
// capture side by side, up to maxCaptures; the next finishes the oldest.
// Each keeps its point in time.
func TestCaptureSideBySide(t *testing.T) {
	logs := randomLogOver(3, 500, 200)
	s, twin := NewShard(), NewShard()
	var snaps []raft.FSMSnapshot
	var wants [][]byte
	for i := range maxCaptures + 1 {
		for _, l := range logs[i*100 : (i+1)*100] {
			s.Apply(l)
			twin.Apply(l)
		}
		wants = append(wants, stopTheWorld(t, twin))
		snap, _ := s.Snapshot()
		snaps = append(snaps, snap)
		stepCapture(s, 5)
		if got := len(s.tab.caps); got > maxCaptures {
			t.Fatalf("%d captures attached", got)
		}
	}
	if snaps[0].(*liveSnapshot).c.attached() {
		t.Fatal("the oldest capture is still attached past maxCaptures")
	}
	for _, l := range logs[400:] {
		s.Apply(l)
	}
	for i := len(snaps) - 1; i >= 0; i-- {
		if !bytes.Equal(persist(t, snaps[i]), wants[i]) {
			t.Fatalf("snapshot %d differs from its point in time", i)
		}
	}
}

// A Restore while a capture is under way leaves the capture's states
// alone: they belong to the table it replaced.
func TestCaptureAcrossRestore(t *testing.T) {
	logs := randomLogOver(4, 600, 200)
	s, twin, other := NewShard(), NewShard(), NewShard()
	for _, l := range logs[:300] {
		s.Apply(l)
		twin.Apply(l)
	}
	for _, l := range logs[300:] {
		other.Apply(l)
	}
	want := stopTheWorld(t, twin)
	snap, _ := s.Snapshot()
	stepCapture(s, 10)
	if err := s.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, other)))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(persist(t, snap), want) {
		t.Fatal("the snapshot differs from its point in time")
	}
}

// Persist runs on raft's snapshot goroutine while applies go on: under
// -race, the capture and the applies share the table only under the lock.
func TestCaptureConcurrentWithApplies(t *testing.T) {
	logs := randomLogOver(5, 2000, 2000)
	s, twin := NewShard(), NewShard()
	for _, l := range logs[:1000] {
		s.Apply(l)
		twin.Apply(l)
	}
	want := stopTheWorld(t, twin)
	snap, _ := s.Snapshot()
	var got []byte
	var wg sync.WaitGroup
	wg.Go(func() {
		var sink memSink
		if err := snap.Persist(&sink); err != nil {
			t.Error(err)
		}
		snap.Release()
		got = sink.Bytes()
	})
	for _, l := range logs[1000:] {
		s.Apply(l)
		twin.Apply(l)
	}
	wg.Wait()
	if !bytes.Equal(got, want) {
		t.Fatal("the snapshot differs from its point in time")
	}
	if !bytes.Equal(stopTheWorld(t, s), stopTheWorld(t, twin)) {
		t.Fatal("the capturing replica ended unlike its twin")
	}
}

// A backup beside a snapshot captures on its own: the snapshot's capture
// is not finished at once (a stop of applies), and both hold their points
// in time, though the later one trims timestamps the earlier one holds.
func TestCaptureBesideAnExport(t *testing.T) {
	p := inline(window.Limit{Algorithm: window.SlidingLog, Limit: 5, Window: 10 * sec})
	ts := int64(1_700_000_000) * sec
	s, twin := NewShard(), NewShard()
	apply := func(index uint64, ts int64, keys int) {
		var checks []Check
		for i := range keys {
			checks = append(checks, Check{Key: fmt.Sprint("k", i), Policy: p, Cost: 1})
		}
		s.Apply(allowLog(index, ts, checks...))
		twin.Apply(allowLog(index, ts, checks...))
	}
	apply(1, ts, 3*captureStep)
	apply(2, ts+5*sec, 3*captureStep)
	apply(3, ts+6*sec, 1) // log time: the first timestamps are live
	want := stopTheWorld(t, twin)
	snap, _ := s.Snapshot()
	stepCapture(s, 10)
	apply(4, ts+12*sec, 1) // now they have aged out
	wantExport, err := twin.ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	export, err := s.ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	if c := snap.(*liveSnapshot).c; !c.attached() || c.next >= c.n0 {
		t.Fatal("the export finished the snapshot's capture")
	}
	apply(5, ts+13*sec, 2)
	if !bytes.Equal(export, wantExport) || !bytes.Equal(persist(t, snap), want) {
		t.Fatal("a capture differs from its point in time")
	}
}
