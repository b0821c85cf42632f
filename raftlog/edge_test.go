package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// GetLog(0) on a group that exists but holds no entries (only stable keys,
// or every entry deleted) must answer ErrLogNotFound, not panic: the range
// check lets index 0 through when firstIndex and lastIndex are both 0.
func TestGetLogZeroOnEmptyGroup(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	keysOnly := s.Group("keys")
	if err := keysOnly.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	emptied := s.Group("emptied")
	if err := emptied.StoreLogs(entries("emptied", 5, 9, 1)); err != nil {
		t.Fatal(err)
	}
	if err := emptied.DeleteRange(5, 9); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*Group{keysOnly, emptied} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: GetLog(0) panicked: %v", g.name, r)
				}
			}()
			var l raft.Log
			if err := g.GetLog(0, &l); !errors.Is(err, raft.ErrLogNotFound) {
				t.Errorf("%s: GetLog(0) = %v; want ErrLogNotFound", g.name, err)
			}
		}()
	}
}

// StoreLogs with index 0 on a group the store has never seen must be
// refused up front, like on any other empty group. It is checked only when
// the group already has state, so the record is written and fsync'd, its
// apply fails, the store fails for good, and the log on disk now holds a
// record replay refuses: the node can never open its log again.
func TestStoreLogsIndexZeroOnNewGroup(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Group("ok").StoreLogs(entries("ok", 1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	bad := s.Group("fresh").StoreLogs([]*raft.Log{{Index: 0, Term: 1, Type: raft.LogCommand}})
	if bad == nil {
		t.Fatal("StoreLogs of index 0 accepted")
	}
	// The caller's mistake must not take the store down...
	if err := s.Group("ok").StoreLog(entry("ok", 4, 1)); err != nil {
		t.Errorf("after a refused StoreLogs(index 0), another group's StoreLog = %v", err)
	}
	s.Close()
	// ... nor leave a log that cannot be opened.
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("reopen after a refused StoreLogs(index 0) = %v", err)
	}
	s2.Close()
}

// Entry indices that wrap past MaxUint64 are accepted (the sequence check
// and checkAppend both wrap), leaving a group whose FirstIndex is above
// its LastIndex.
func TestStoreLogsIndexWrap(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	g := s.Group("g")
	const top = ^uint64(0)
	err := g.StoreLogs([]*raft.Log{{Index: top, Term: 1}, {Index: 0, Term: 1}})
	f, _ := g.FirstIndex()
	l, _ := g.LastIndex()
	if err == nil && f > l {
		t.Fatalf("StoreLogs(MaxUint64, 0) accepted: FirstIndex %d > LastIndex %d", f, l)
	}
}

// A power cut while an unacknowledged record that spans several pages is
// being written back can keep its later pages and lose the first (page
// writeback has no order; in a preallocated file the lost page reads as
// zeros). Nothing valid follows the damage, so it is a torn write and
// Open must cut it, not refuse the whole log.
func TestTornRecordLaterPagesPersisted(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := s.Group("g")
	if err := g.StoreLogs(entries("g", 1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, segName(1))
	before, _ := os.ReadFile(path)
	end := recordsEnd(before)
	big := pageSpanning("g", 4)
	if err := g.StoreLog(big); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// The crash: the page holding the new record's start never reached
	// the disk (zeros), the pages after it did.
	data, _ := os.ReadFile(path)
	pageEnd := (end/4096 + 1) * 4096
	for i := end; i < pageEnd && i < int64(len(data)); i++ {
		data[i] = 0
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open after a power cut during an unacknowledged write = %v", err)
	}
	defer s2.Close()
	m := newModel()
	m.store(entries("g", 1, 3, 1))
	checkGroup(t, s2.Group("g"), m)
}

// The same power cut in a log written before batches (batch.go), whose
// group-commit writes put their records side by side: the page with the
// first record's start is lost, the second record reached the disk whole.
// Nothing says the two came from one write, so replay cannot tell this
// from damage in the middle of the log: Open refuses the log (the node is
// then rebuilt from its peers), and never skips the damage to keep what
// follows.
func TestTornGroupCommitWithALaterRecordIsRefused(t *testing.T) {
	dir, path, data := storedThree(t)
	end := len(data)
	big := pageSpanning("a", 4)
	b1, _ := encodeEntries(recAppend, "a", []*raft.Log{big})
	b2, _ := encodeEntries(recAppend, "b", entries("b", 1, 2, 1))
	saltRecord(b1, fileSalt(data))
	saltRecord(b2, fileSalt(data))
	data = append(append(data, b1...), b2...)
	loseFirstPage(data, end)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Options{})
	if err == nil {
		s2.Close()
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open after a power cut during an unacknowledged group commit = %v, want ErrCorrupt", err)
	}
}

// A StoreLogs whose record would be larger than a record may be is
// refused alone, before anything is written: replay would take its header
// for damage and refuse the whole log. The store goes on, and replays.
func TestRecordOverThePayloadLimitIsRefused(t *testing.T) {
	payloadLimit = 4096
	t.Cleanup(func() { payloadLimit = maxPayload })
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	big := entry("g", 1, 1)
	big.Data = make([]byte, payloadLimit)
	if err := s.Group("g").StoreLog(big); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("StoreLog of an entry over the limit = %v, want an error naming the limit", err)
	}
	fits := entry("g", 1, 1)
	fits.Data = make([]byte, payloadLimit/2)
	if err := s.Group("g").StoreLog(fits); err != nil {
		t.Fatalf("the store refused a fitting entry after an oversized one: %v", err)
	}
	s.Close()
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var got raft.Log
	if err := s2.Group("g").GetLog(1, &got); err != nil || len(got.Data) != len(fits.Data) {
		t.Fatalf("after reopening, entry 1 = %d bytes, %v; want the fitting entry", len(got.Data), err)
	}
}

// A node with many groups has a checkpoint (three raft keys per group)
// larger than a page, so the write that creates a segment spans pages. A
// power cut before its fsync may keep a later page and lose the first
// (header and checkpoint start): the segment was never used, and must be
// removed like any other torn rotation, not refused.
func TestTornRotationFirstPageLost(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ms := map[string]*model{}
	for gi := range 64 {
		name := fmt.Sprintf("shard-%d", gi)
		g, m := s.Group(name), newModel()
		for _, k := range []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand"} {
			if err := g.Set([]byte(k), []byte("node-0000000000001")); err != nil {
				t.Fatal(err)
			}
			m.kv[k] = "node-0000000000001"
		}
		ms[name] = m
	}
	s.mu.RLock()
	cp := encodeCheckpoint(s.stableKeys())
	s.mu.RUnlock()
	s.Close()
	if len(cp) <= 4096 {
		t.Fatalf("checkpoint of %d bytes: the test needs one over a page", len(cp))
	}
	salt := newSalt()
	full := append(segHeader(2, salt), cp...)
	saltRecord(full[segBody:], salt)
	clear(full[:4096]) // the first page never reached the disk
	if err := os.WriteFile(filepath.Join(dir, segName(2)), full, 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open after a power cut while a segment was created = %v", err)
	}
	defer s2.Close()
	for n, m := range ms {
		checkGroup(t, s2.Group(n), m)
	}
}
