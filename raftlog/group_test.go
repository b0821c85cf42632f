package raftlog

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// The LogStore tests follow the expectations raft's own stores are tested
// against (raft-boltdb's and raft's inmem store): indexes of an empty log
// are 0, a missing entry is raft.ErrLogNotFound, DeleteRange is inclusive.

func TestEmptyLog(t *testing.T) {
	g := openT(t, t.TempDir(), Options{}).Group("g")
	if i, err := g.FirstIndex(); i != 0 || err != nil {
		t.Fatalf("FirstIndex = %d, %v", i, err)
	}
	if i, err := g.LastIndex(); i != 0 || err != nil {
		t.Fatalf("LastIndex = %d, %v", i, err)
	}
	var l raft.Log
	if err := g.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(1) = %v", err)
	}
	if err := g.DeleteRange(1, 10); err != nil {
		t.Fatalf("DeleteRange on empty log: %v", err)
	}
	if !g.IsMonotonic() {
		t.Fatal("not monotonic")
	}
}

func TestStoreAndGet(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	g := s.Group("g")
	m := newModel()
	if err := g.StoreLog(entry("g", 1, 1)); err != nil {
		t.Fatal(err)
	}
	m.store([]*raft.Log{entry("g", 1, 1)})
	if err := g.StoreLogs(entries("g", 2, 10, 2)); err != nil {
		t.Fatal(err)
	}
	m.store(entries("g", 2, 10, 2))
	if err := g.StoreLogs(nil); err != nil {
		t.Fatalf("StoreLogs(nil): %v", err)
	}
	checkGroup(t, g, m)
	// Zero time, nil data and nil extensions round-trip too.
	bare := &raft.Log{Index: 11, Term: 3, Type: raft.LogNoop}
	if err := g.StoreLog(bare); err != nil {
		t.Fatal(err)
	}
	m.store([]*raft.Log{bare})
	checkGroup(t, g, m)
	s.Close()
	checkGroup(t, openT(t, dir, Options{}).Group("g"), m)
}

func TestStoreLogsRefusesGaps(t *testing.T) {
	g := openT(t, t.TempDir(), Options{}).Group("g")
	if err := g.StoreLogs(entries("g", 5, 7, 1)); err != nil {
		t.Fatalf("an empty log takes any start: %v", err)
	}
	for _, bad := range [][]*raft.Log{
		entries("g", 9, 9, 1),                           // gap after the last
		entries("g", 7, 8, 1),                           // overlaps the last
		{entry("g", 8, 1), entry("g", 10, 1)},           // gap inside the call
		{&raft.Log{Index: 0}},                           // index 0
		append(entries("g", 8, 8, 1), entry("g", 8, 1)), // repeated
	} {
		if err := g.StoreLogs(bad); !errors.Is(err, errNonSequential) {
			t.Errorf("StoreLogs(%d..) = %v; want errNonSequential", bad[0].Index, err)
		}
	}
	if l, _ := g.LastIndex(); l != 7 {
		t.Fatalf("LastIndex = %d after refused writes", l)
	}
}

func TestDeleteRange(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	g := s.Group("g")
	m := newModel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(g.StoreLogs(entries("g", 1, 20, 1)))
	m.store(entries("g", 1, 20, 1))
	for _, r := range [][2]uint64{
		{1, 5},   // head, after a snapshot
		{0, 6},   // head from below the first
		{18, 20}, // tail, on a conflict
		{15, 99}, // tail past the last
		{1, 3},   // nothing left there
		{50, 60}, // nothing there yet
	} {
		must(g.DeleteRange(r[0], r[1]))
		m.deleteRange(r[0], r[1])
		checkGroup(t, g, m)
	}
	if err := g.DeleteRange(9, 10); !errors.Is(err, errMiddleDelete) {
		t.Fatalf("DeleteRange inside the log = %v", err)
	}
	// Entries rewritten after a tail truncation, in a new term.
	must(g.StoreLogs(entries("g", 15, 17, 2)))
	m.store(entries("g", 15, 17, 2))
	checkGroup(t, g, m)
	s.Close()
	s = openT(t, dir, Options{})
	g = s.Group("g")
	checkGroup(t, g, m)
	// Emptied (as raft does after installing a snapshot), the log starts
	// again anywhere.
	must(g.DeleteRange(7, 17))
	m.deleteRange(7, 17)
	checkGroup(t, g, m)
	must(g.StoreLogs(entries("g", 1000, 1002, 3)))
	m.store(entries("g", 1000, 1002, 3))
	checkGroup(t, g, m)
	s.Close()
	checkGroup(t, openT(t, dir, Options{}).Group("g"), m)
}

func TestGroupsAreSeparate(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	ms := map[string]*model{}
	for _, name := range []string{"meta", "shard-0", "shard-1"} {
		ms[name] = newModel()
	}
	for i := uint64(1); i <= 30; i++ {
		for name, m := range ms {
			l := entry(name, i, 1)
			if err := s.Group(name).StoreLog(l); err != nil {
				t.Fatal(err)
			}
			m.store([]*raft.Log{l})
		}
	}
	if err := s.Group("shard-0").DeleteRange(1, 25); err != nil {
		t.Fatal(err)
	}
	ms["shard-0"].deleteRange(1, 25)
	for name, m := range ms {
		checkGroup(t, s.Group(name), m)
	}
	if got := s.Groups(); len(got) != 3 || got[0] != "meta" {
		t.Fatalf("Groups = %v", got)
	}
	s.Close()
	s = openT(t, dir, Options{})
	for name, m := range ms {
		checkGroup(t, s.Group(name), m)
	}
}

func TestStableStore(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	g := s.Group("g")
	if _, err := g.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get of a missing key = %v; raft wants \"not found\"", err)
	}
	if _, err := g.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64 of a missing key = %v", err)
	}
	if err := g.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if err := g.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := g.SetUint64([]byte("CurrentTerm"), 8); err != nil {
		t.Fatal(err)
	}
	if err := s.Group("other").SetUint64([]byte("CurrentTerm"), 99); err != nil {
		t.Fatal(err)
	}
	check := func(g *Group) {
		t.Helper()
		if v, err := g.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
			t.Fatalf("Get = %q, %v", v, err)
		}
		if v, err := g.GetUint64([]byte("CurrentTerm")); err != nil || v != 8 {
			t.Fatalf("GetUint64 = %d, %v", v, err)
		}
		if _, err := g.GetUint64([]byte("LastVoteCand")); err == nil {
			t.Fatal("GetUint64 of a 2-byte value succeeded")
		}
	}
	check(g)
	s.Close()
	s = openT(t, dir, Options{})
	check(s.Group("g"))
	// Raft's own test of whether a group was ever started.
	has, err := raft.HasExistingState(s.Group("g"), s.Group("g"), raft.NewInmemSnapshotStore())
	if err != nil || !has {
		t.Fatalf("HasExistingState = %v, %v", has, err)
	}
	has, err = raft.HasExistingState(s.Group("new"), s.Group("new"), raft.NewInmemSnapshotStore())
	if err != nil || has {
		t.Fatalf("HasExistingState of a new group = %v, %v", has, err)
	}
}

func TestLogCacheInFront(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	c, err := raft.NewLogCache(4, s.Group("g"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StoreLogs(entries("g", 1, 10, 1)); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := c.GetLog(2, &l); err != nil || !sameLog(&l, entry("g", 2, 1)) {
		t.Fatalf("GetLog through the cache (a miss) = %+v, %v", l, err)
	}
	if err := c.DeleteRange(1, 8); err != nil {
		t.Fatal(err)
	}
	if err := c.GetLog(2, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog of a deleted entry = %v", err)
	}
	if !c.IsMonotonic() {
		t.Fatal("the cache does not pass IsMonotonic through")
	}
}
