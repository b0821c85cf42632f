package raftlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// writeHistory writes a small history on two groups and returns the
// models, plus the size of the only segment before its last record.
func writeHistory(t *testing.T, dir string) (map[string]*model, int64) {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ms := map[string]*model{"a": newModel(), "b": newModel()}
	for i := uint64(1); i <= 5; i++ {
		for name, m := range ms {
			ls := entries(name, 2*i-1, 2*i, 1)
			if err := s.Group(name).StoreLogs(ls); err != nil {
				t.Fatal(err)
			}
			m.store(ls)
		}
	}
	if err := s.Group("a").DeleteRange(1, 3); err != nil {
		t.Fatal(err)
	}
	ms["a"].deleteRange(1, 3)
	if err := s.Group("b").SetUint64([]byte("CurrentTerm"), 4); err != nil {
		t.Fatal(err)
	}
	ms["b"].kv["CurrentTerm"] = "\x00\x00\x00\x00\x00\x00\x00\x04"
	before := s.active().size
	// The last record: three entries of b.
	if err := s.Group("b").StoreLogs(entries("b", 11, 13, 2)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return ms, before
}

func onlySegment(t *testing.T, dir string) string {
	t.Helper()
	files := segFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("segments = %v", files)
	}
	return files[0]
}

func checkAll(t *testing.T, dir string, ms map[string]*model) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	for name, m := range ms {
		checkGroup(t, s.Group(name), m)
	}
	return s
}

// A crash in the middle of the last write leaves any prefix of its
// record: every one must open as the log without that record, and take
// appends after it.
func TestTornLastRecordAtEveryOffset(t *testing.T) {
	dir := t.TempDir()
	ms, before := writeHistory(t, dir)
	path := onlySegment(t, dir)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for cut := before; cut < int64(len(full)); cut++ {
		d := copyDir(t, dir)
		if err := os.Truncate(filepath.Join(d, filepath.Base(path)), cut); err != nil {
			t.Fatal(err)
		}
		s := checkAll(t, d, ms)
		if got := s.active().size; got != before {
			t.Fatalf("cut at %d: log continues at %d, want %d", cut, got, before)
		}
		// The torn bytes are gone: a new write and another reopen hold.
		if err := s.Group("b").StoreLogs(entries("b", 11, 11, 3)); err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		s.Close()
		m := *ms["b"]
		m.logs = append(append([]*raft.Log(nil), m.logs...), entry("b", 11, 3))
		checkAll(t, d, map[string]*model{"a": ms["a"], "b": &m})
	}
	// And uncut, the record is there.
	ms["b"].store(entries("b", 11, 13, 2))
	checkAll(t, dir, ms)
}

// A power cut can leave the last record's bytes unwritten (zeros) or
// garbled while the file is already long enough: still a torn write.
func TestTornLastRecordGarbled(t *testing.T) {
	dir := t.TempDir()
	ms, before := writeHistory(t, dir)
	path := onlySegment(t, dir)
	full, _ := os.ReadFile(path)
	for name, mutate := range map[string]func(b []byte){
		"zeroed":          func(b []byte) { clear(b[before:]) },
		"payload garbled": func(b []byte) { b[len(b)-1] ^= 0xff },
		"zeros appended":  nil,
	} {
		t.Run(name, func(t *testing.T) {
			d := copyDir(t, dir)
			b := append([]byte(nil), full...)
			want := ms
			if mutate != nil {
				mutate(b)
			} else {
				b = append(b, make([]byte, 4096)...) // preallocated or extended, never written
				want = cloneModels(ms)
				want["b"].store(entries("b", 11, 13, 2))
			}
			if err := os.WriteFile(filepath.Join(d, filepath.Base(path)), b, 0o644); err != nil {
				t.Fatal(err)
			}
			checkAll(t, d, want)
		})
	}
}

func cloneModels(ms map[string]*model) map[string]*model {
	out := map[string]*model{}
	for k, m := range ms {
		c := *m
		c.logs = append([]*raft.Log(nil), m.logs...)
		out[k] = &c
	}
	return out
}

// Damage before the last record is not a torn write: acknowledged
// entries would be lost silently. Open refuses, naming file and offset.
func TestMidLogCorruptionRefused(t *testing.T) {
	dir := t.TempDir()
	_, before := writeHistory(t, dir)
	path := onlySegment(t, dir)
	full, _ := os.ReadFile(path)
	first := segBody + recHeaderSize + 1 // inside the checkpoint
	for name, off := range map[string]int{
		"segment header":        3,
		"segment fence":         segHeaderSize + recHeaderSize + 3,
		"first record's header": segBody + 1,
		"first record's length": segBody,
		"checkpoint payload":    first,
		"an append's entry":     len(full) / 2,
		"second last record":    int(before) - 3,
	} {
		t.Run(name, func(t *testing.T) {
			d := copyDir(t, dir)
			b := append([]byte(nil), full...)
			b[off] ^= 0x10
			if err := os.WriteFile(filepath.Join(d, filepath.Base(path)), b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Open(d, Options{})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(path)) {
				t.Fatalf("open = %v; want ErrCorrupt naming the file", err)
			}
		})
	}
}

// Any damage in a segment that is not the last one is refused, even at
// its end, and so is a missing segment.
func TestOlderSegmentDamageRefused(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SegmentSize: 512, MaxSegments: 100})
	g := s.Group("g")
	for i := uint64(1); i <= 40; i++ {
		if err := g.StoreLog(entry("g", i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	files := segFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("segments = %v", files)
	}
	t.Run("torn end of an older segment", func(t *testing.T) {
		d := copyDir(t, dir)
		p := filepath.Join(d, filepath.Base(files[0]))
		st, _ := os.Stat(p)
		os.Truncate(p, st.Size()-3)
		if _, err := Open(d, Options{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("open = %v", err)
		}
	})
	t.Run("missing middle segment", func(t *testing.T) {
		d := copyDir(t, dir)
		os.Remove(filepath.Join(d, filepath.Base(files[1])))
		if _, err := Open(d, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("open = %v", err)
		}
	})
	t.Run("stray file", func(t *testing.T) {
		d := copyDir(t, dir)
		os.WriteFile(filepath.Join(d, "junk.seg"), nil, 0o644)
		if _, err := Open(d, Options{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("open = %v", err)
		}
	})
	t.Run("unknown record type", func(t *testing.T) {
		d := copyDir(t, dir)
		last := filepath.Join(d, filepath.Base(files[len(files)-1]))
		e := newEncoder(99, 0)
		rec := e.finish()
		b, _ := os.ReadFile(last)
		saltRecord(rec, fileSalt(b))
		os.WriteFile(last, append(b, rec...), 0o644)
		if _, err := Open(d, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "newer") {
			t.Fatalf("open = %v", err)
		}
	})
}

// A crash while a new segment is created leaves it empty or torn before
// its checkpoint: it is removed and the previous one goes on.
func TestTornRotation(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SegmentSize: 512, MaxSegments: 100})
	g := s.Group("g")
	m := newModel()
	for i := uint64(1); i <= 20; i++ {
		if err := g.StoreLog(entry("g", i, 1)); err != nil {
			t.Fatal(err)
		}
		m.store([]*raft.Log{entry("g", i, 1)})
	}
	if err := g.SetUint64([]byte("CurrentTerm"), 5); err != nil {
		t.Fatal(err)
	}
	m.kv["CurrentTerm"] = "\x00\x00\x00\x00\x00\x00\x00\x05"
	s.Close()
	files := segFiles(t, dir)
	next := filepath.Join(dir, segName(uint32(len(files)+1)))
	full := append(segHeader(uint32(len(files)+1), 0), encodeCheckpoint(nil)...)
	for _, cut := range []int{0, 5, segHeaderSize, segHeaderSize + 7, segBody - 1, segBody, segBody + 7, len(full) - 1} {
		d := copyDir(t, dir)
		p := filepath.Join(d, filepath.Base(next))
		os.WriteFile(p, full[:cut], 0o644)
		s := checkAll(t, d, map[string]*model{"g": m})
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("cut at %d: torn segment kept (%v)", cut, err)
		}
		if err := s.Group("g").StoreLog(entry("g", 21, 1)); err != nil {
			t.Fatal(err)
		}
	}
	// The first segment of all, torn at its creation: a fresh log.
	d := t.TempDir()
	os.WriteFile(filepath.Join(d, segName(1)), full[:9], 0o644)
	s = openT(t, d, Options{})
	if err := s.Group("g").StoreLog(entry("g", 1, 1)); err != nil {
		t.Fatal(err)
	}
}

// Cutting a torn tail is only done once it is on disk: an open whose cut
// cannot be flushed fails, naming the segment, rather than taking appends
// after torn bytes that a later replay would meet mid-log.
func TestTornTailCutThatCannotSyncFailsOpen(t *testing.T) {
	dir := t.TempDir()
	_, before := writeHistory(t, dir)
	path := onlySegment(t, dir)
	if err := os.Truncate(path, before+5); err != nil {
		t.Fatal(err)
	}
	ops := defaultFileOps()
	ops.sync = func(*os.File) error { return errors.New("injected EIO") }
	s, err := openWith(dir, Options{}, ops)
	if err == nil {
		s.Close()
		t.Fatal("open succeeded although the cut of the torn tail was not flushed")
	}
	if !strings.Contains(err.Error(), "cut torn tail of "+path) || !strings.Contains(err.Error(), "injected EIO") {
		t.Fatalf("err = %v, want it to name the cut of %s and the cause", err, path)
	}
}
