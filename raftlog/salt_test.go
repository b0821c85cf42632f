package raftlog

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// forgedKey is entry data a client could send (a key is stored as it is):
// past its first page, a whole record, checksummed as an unsalted segment
// would hold it, or as one of the given salt.
func forgedKey(salt uint32) []byte {
	rec := encodeSet("x", []byte("CurrentTerm"), []byte("forged"))
	saltRecord(rec, salt)
	data := make([]byte, 2*4096)
	for i := range data {
		data[i] = byte(i%251 + 1)
	}
	return append(data, rec...)
}

// A write torn by a power cut (its first page lost) whose later pages hold
// a client's key that reads as a whole record is cut as torn, like any torn
// write: a client cannot know the segment's salt, so the record it forged
// is not whole there. Unsalted, replay took it for damage in the middle of
// the log and refused the whole log: the node had to be rebuilt.
func TestTornWriteWithAForgedRecordIsCut(t *testing.T) {
	for _, forged := range []string{"unsalted", "another salt"} {
		t.Run(forged, func(t *testing.T) {
			dir, path, data := storedThree(t)
			salt := fileSalt(data)
			if salt == 0 {
				t.Fatal("a new segment is not salted")
			}
			guess := uint32(0)
			if forged == "another salt" {
				guess = salt ^ 0x5a5a
			}
			l := entry("a", 4, 1)
			l.Data = forgedKey(guess)
			rec, _ := encodeEntries(recAppend, "a", []*raft.Log{l})
			saltRecord(rec, salt)
			end := len(data)
			data = append(data, rec...)
			loseFirstPage(data, end)
			s2 := reopenCut(t, dir, path, data)
			checkGroup(t, s2.Group("x"), newModel())
		})
	}
}

// The same forged key in a write that reached the disk whole is an entry
// like any other: it replays as written, and nothing of it is read as a
// record of its own.
func TestForgedRecordInAWholeWriteIsData(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	l := entry("a", 1, 1)
	l.Data = forgedKey(0)
	if err := s.Group("a").StoreLogs([]*raft.Log{l}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := openT(t, dir, Options{})
	m := newModel()
	m.store([]*raft.Log{l})
	checkGroup(t, s2.Group("a"), m)
	checkGroup(t, s2.Group("x"), newModel())
}

// A log written before salts (segV1: the sequence number in 8 bytes, no
// salt) still reads; it goes on in new segments, salted and fenced.
func TestUnsaltedSegmentsStillRead(t *testing.T) {
	dir := t.TempDir()
	h := make([]byte, segHeaderSize)
	copy(h, segMagic)
	h[7] = segV1
	binary.LittleEndian.PutUint64(h[8:], 1)
	rec, _ := encodeEntries(recAppend, "a", entries("a", 1, 3, 1))
	data := append(append(h, encodeCheckpoint(nil)...), rec...)
	if err := os.WriteFile(filepath.Join(dir, segName(1)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	goesOnFenced(t, dir, segV1)
}

// goesOnFenced opens the log in dir, whose one segment of format old holds
// group a's entries 1 to 3: it reads them, starts a segment of segV3 at
// once (a release before salts would drop the last segment, of a format
// it cannot read, as torn), goes on in segments of segV3, and reads it all
// back after a reopen.
func goesOnFenced(t *testing.T, dir string, old byte) {
	t.Helper()
	s := openT(t, dir, Options{SegmentSize: 4096})
	if files := segFiles(t, dir); len(files) != 2 {
		t.Fatalf("segments after open = %v, want the old one and a new one", files)
	}
	m := newModel()
	m.store(entries("a", 1, 3, 1))
	checkGroup(t, s.Group("a"), m)
	for i := uint64(4); i <= 40; i++ {
		e := pageSpanning("a", i)
		if err := s.Group("a").StoreLogs([]*raft.Log{e}); err != nil {
			t.Fatal(err)
		}
		m.store([]*raft.Log{e})
	}
	s.Close()
	files := segFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("segments = %v, want a rotation", files)
	}
	for i, f := range files {
		b, _ := os.ReadFile(f)
		if v := b[7]; (i == 0 && v != old) || (i > 0 && v != segV3) {
			t.Errorf("%s: format %d", filepath.Base(f), v)
		}
	}
	s2 := openT(t, dir, Options{SegmentSize: 4096})
	checkGroup(t, s2.Group("a"), m)
}

// A segment of a format this release does not know stops the open, naming
// it, as written by a newer floodgate: never read as damage or cut.
func TestNewerSegmentFormatRefused(t *testing.T) {
	dir, path, data := storedThree(t)
	data[7] = segV3 + 1
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "newer floodgate") || !strings.Contains(err.Error(), segName(1)) {
		t.Fatalf("open = %v", err)
	}
	if after, _ := os.ReadFile(path); len(after) != len(data) {
		t.Fatalf("the segment was cut to %d of %d bytes", len(after), len(data))
	}
}

// A log of segV2 (salted, no fence: written from 2026-11-28 to 2026-11-29)
// still reads; it goes on in a new segment of segV3, started at open.
func TestSegV2StillReads(t *testing.T) {
	dir := t.TempDir()
	salt := newSalt()
	h := make([]byte, segHeaderSize)
	copy(h, segMagic)
	h[7] = segV2
	binary.LittleEndian.PutUint32(h[8:], 1)
	binary.LittleEndian.PutUint32(h[12:], salt)
	cp := encodeCheckpoint(nil)
	rec, _ := encodeEntries(recAppend, "a", entries("a", 1, 3, 1))
	saltRecord(cp, salt)
	saltRecord(rec, salt)
	data := append(append(h, cp...), rec...)
	if err := os.WriteFile(filepath.Join(dir, segName(1)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	goesOnFenced(t, dir, segV2)
}

// Releases before segV2 read only unsalted records, and took a last
// segment whose header they did not know for one torn while being created
// (and dropped it, entries and all) unless a whole record followed its
// first byte. Every segment this release writes has one, its fence, so
// those releases refuse it instead; this release never reads the fence as
// a record, nor takes it for one when judging a torn header.
func TestSegmentsFencedAgainstUnsaltedReaders(t *testing.T) {
	dir, _, _ := storedThree(t)
	// What a release before segV2 ran on the last segment (replay.go's
	// recordAfter of 2026-11-27: any offset past the first byte).
	unsaltedRecordAfter := func(data []byte) bool {
		for i := 1; i+recHeaderSize <= len(data); i++ {
			if _, _, err := parseFramed(data[i:], 0); err == nil {
				return true
			}
		}
		return false
	}
	for _, f := range segFiles(t, dir) {
		data, _ := os.ReadFile(f)
		if data[7] != segV3 || !unsaltedRecordAfter(data) {
			t.Errorf("%s: format %d, a whole unsalted record: %v", filepath.Base(f), data[7], unsaltedRecordAfter(data))
		}
		if fencePayload[0] != recFence {
			t.Errorf("fence payload type %d, want recFence", fencePayload[0])
		}
		// A new segment torn while being created, but for its header: the
		// fence alone is not a record, so it is still a torn creation.
		torn := append(make([]byte, segHeaderSize), fence...)
		if recordAfter(torn, 0) {
			t.Error("a fence read as a record")
		}
	}
}
