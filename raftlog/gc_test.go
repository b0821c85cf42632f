package raftlog

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// A busy group that truncates its head after each "snapshot" keeps only
// the segments its trailing entries are in.
func TestSegmentsDeletedOnceUnneeded(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SegmentSize: 2048, MaxSegments: 100})
	g := s.Group("busy")
	m := newModel()
	if err := g.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	m.kv["CurrentTerm"] = "\x00\x00\x00\x00\x00\x00\x00\x03"
	maxSegs := 0
	for i := uint64(1); i <= 600; i++ {
		if err := g.StoreLog(entry("busy", i, 1)); err != nil {
			t.Fatal(err)
		}
		m.store([]*raft.Log{entry("busy", i, 1)})
		if i%50 == 0 { // snapshot, keep 20 trailing entries
			if err := g.DeleteRange(1, i-20); err != nil {
				t.Fatal(err)
			}
			m.deleteRange(1, i-20)
		}
		maxSegs = max(maxSegs, segCount(t, s))
	}
	if n := segCount(t, s); n > 4 {
		t.Fatalf("%d segments kept for %d live entries", n, len(m.logs))
	}
	if maxSegs < 3 {
		t.Fatalf("never rotated past 2 segments (max %d): the test proves nothing", maxSegs)
	}
	checkGroup(t, g, m)
	s.Close()
	// The stable key, set in a segment long deleted, lives on in the
	// checkpoints.
	checkGroup(t, openT(t, dir, Options{}).Group("busy"), m)
}

// A group that wrote a few entries long ago and never snapshots would
// keep every later segment; past MaxSegments it is rewritten forward.
func TestIdleGroupRewrittenForward(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SegmentSize: 2048, MaxSegments: 3})
	idle, busy := s.Group("meta"), s.Group("shard-1")
	mi, mb := newModel(), newModel()
	if err := idle.StoreLogs(entries("meta", 1, 5, 1)); err != nil {
		t.Fatal(err)
	}
	mi.store(entries("meta", 1, 5, 1))
	if err := idle.Set([]byte("LastVoteCand"), []byte("n1")); err != nil {
		t.Fatal(err)
	}
	mi.kv["LastVoteCand"] = "n1"
	for i := uint64(1); i <= 800; i++ {
		if err := busy.StoreLog(entry("shard-1", i, 1)); err != nil {
			t.Fatal(err)
		}
		mb.store([]*raft.Log{entry("shard-1", i, 1)})
		if i%40 == 0 {
			if err := busy.DeleteRange(1, i-10); err != nil {
				t.Fatal(err)
			}
			mb.deleteRange(1, i-10)
		}
		if n := segCount(t, s); n > 4 {
			t.Fatalf("after %d entries: %d segments (MaxSegments 3)", i, n)
		}
	}
	// The idle group's tail can still be truncated and appended to.
	if err := idle.StoreLog(entry("meta", 6, 2)); err != nil {
		t.Fatal(err)
	}
	mi.store([]*raft.Log{entry("meta", 6, 2)})
	checkGroup(t, idle, mi)
	checkGroup(t, busy, mb)
	s.Close()
	s = openT(t, dir, Options{})
	checkGroup(t, s.Group("meta"), mi)
	checkGroup(t, s.Group("shard-1"), mb)
}

// A group whose log is too big to copy is left to its snapshots.
func TestLargePinningGroupNotRewritten(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SegmentSize: 1024, MaxSegments: 2})
	g := s.Group("big")
	for i := uint64(1); i <= 100; i++ {
		if err := g.StoreLog(entry("big", i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if n := segCount(t, s); n < 5 {
		t.Fatalf("%d segments: a log of 100 entries was rewritten or dropped", n)
	}
	if got := s.Stats().Records; got != 100 {
		t.Fatalf("records = %d; rewrites happened", got)
	}
	if err := g.DeleteRange(1, 95); err != nil {
		t.Fatal(err)
	}
	if n := segCount(t, s); n > 2 {
		t.Fatalf("%d segments after the head went", n)
	}
}

func TestDrop(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SegmentSize: 1024, MaxSegments: 100})
	gone, kept := s.Group("moved"), s.Group("kept")
	mk := newModel()
	for i := uint64(1); i <= 60; i++ {
		if err := gone.StoreLog(entry("moved", i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := gone.SetUint64([]byte("CurrentTerm"), 9); err != nil {
		t.Fatal(err)
	}
	before := segCount(t, s)
	if err := s.Drop("moved"); err != nil {
		t.Fatal(err)
	}
	if err := kept.StoreLog(entry("kept", 1, 1)); err != nil {
		t.Fatal(err)
	}
	mk.store([]*raft.Log{entry("kept", 1, 1)})
	if after := segCount(t, s); after >= before || after > 2 {
		t.Fatalf("segments: %d before Drop, %d after", before, after)
	}
	var l raft.Log
	for name, call := range map[string]error{
		"FirstIndex": func() error { _, err := gone.FirstIndex(); return err }(),
		"GetLog":     gone.GetLog(1, &l),
		"StoreLog":   gone.StoreLog(entry("moved", 61, 1)),
		"Get":        func() error { _, err := gone.Get([]byte("CurrentTerm")); return err }(),
	} {
		if !errors.Is(call, ErrDropped) {
			t.Errorf("%s on a dropped handle = %v", name, call)
		}
	}
	if got := s.Groups(); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("Groups = %v", got)
	}
	// The replica comes back: a fresh, empty group of the same name.
	back := s.Group("moved")
	if back == gone {
		t.Fatal("Group returned the dropped handle")
	}
	mb := newModel()
	checkGroup(t, back, mb)
	if _, err := back.Get([]byte("CurrentTerm")); err == nil {
		t.Fatal("a dropped group's key survived")
	}
	if err := back.StoreLogs(entries("moved", 500, 502, 4)); err != nil {
		t.Fatal(err)
	}
	mb.store(entries("moved", 500, 502, 4))
	s.Close()
	s = openT(t, dir, Options{})
	checkGroup(t, s.Group("moved"), mb)
	checkGroup(t, s.Group("kept"), mk)
	if _, err := s.Group("moved").Get([]byte("CurrentTerm")); err == nil {
		t.Fatal("a dropped group's key came back after reopen")
	}
}

// Many groups pinning old segments, and segment GC racing readers.
func TestGCWithConcurrentReaders(t *testing.T) {
	s := openT(t, t.TempDir(), Options{SegmentSize: 4096, MaxSegments: 2})
	stop := make(chan struct{})
	done := make(chan error)
	g := s.Group("w")
	go func() {
		var l raft.Log
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			f, _ := g.FirstIndex()
			if f == 0 {
				continue
			}
			if err := g.GetLog(f, &l); err != nil && !errors.Is(err, raft.ErrLogNotFound) {
				done <- fmt.Errorf("GetLog(%d): %w", f, err)
				return
			}
		}
	}()
	for i := uint64(1); i <= 400; i++ {
		if err := g.StoreLog(entry("w", i, 1)); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if err := g.DeleteRange(1, i-5); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
