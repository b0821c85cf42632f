package raftlog

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
)

// allocOps counts preallocations and can make them fail.
type allocOps struct {
	calls atomic.Int64
	fail  atomic.Bool
}

func (a *allocOps) ops() fileOps {
	d := defaultFileOps()
	d.allocate = func(f *os.File, off, n int64) error {
		a.calls.Add(1)
		if a.fail.Load() {
			return syscall.ENOSPC
		}
		// Zeros written by hand stand in for fallocate, so the test means
		// the same on every filesystem.
		_, err := f.WriteAt(make([]byte, n), off)
		return err
	}
	return d
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// Small appends land inside the preallocated file: one allocation serves
// many flushes, and the file never grows with them.
func TestAppendsStayInsidePreallocation(t *testing.T) {
	a := &allocOps{}
	dir := t.TempDir()
	s, err := openWith(dir, Options{}, a.ops())
	if err != nil {
		t.Fatal(err)
	}
	g := s.Group("g")
	if err := g.StoreLog(entry("g", 1, 1)); err != nil {
		t.Fatal(err)
	}
	path := onlySegment(t, dir)
	size := fileSize(t, path)
	if size < preallocChunk {
		t.Fatalf("file is %d bytes after the first append; want at least %d preallocated", size, preallocChunk)
	}
	for i := uint64(2); i <= 200; i++ {
		if err := g.StoreLog(entry("g", i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if got := fileSize(t, path); got != size {
		t.Errorf("file grew from %d to %d bytes with small appends", size, got)
	}
	if n := a.calls.Load(); n != 1 {
		t.Errorf("%d preallocations for 200 small appends; want 1", n)
	}
	s.Close()
	// A clean close trims the zeros.
	data, _ := os.ReadFile(path)
	if end := recordsEnd(data); end != int64(len(data)) {
		t.Errorf("closed file is %d bytes, its records end at %d", len(data), end)
	}
}

// A crash leaves the preallocated zeros after the last record, and maybe a
// torn write inside them: the log opens with every whole record, cuts the
// torn one, and takes appends after it.
func TestCrashInsidePreallocation(t *testing.T) {
	dir := t.TempDir()
	s, err := openWith(dir, Options{}, (&allocOps{}).ops())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := newModel()
	for i := uint64(1); i <= 10; i++ {
		ls := entries("g", i, i, 1)
		if err := s.Group("g").StoreLogs(ls); err != nil {
			t.Fatal(err)
		}
		m.store(ls)
	}
	path := onlySegment(t, dir)
	clean, _ := os.ReadFile(path)
	end := recordsEnd(clean)
	if int64(len(clean)) <= end {
		t.Fatalf("no preallocated tail: %d bytes, records end at %d", len(clean), end)
	}
	rec, _ := encodeEntries(recAppend, "g", []*raft.Log{entry("g", 11, 1)})
	for name, tear := range map[string]func(b []byte){
		"zeros only":         func([]byte) {},
		"torn header":        func(b []byte) { copy(b[end:], rec[:recHeaderSize-3]) },
		"header, no payload": func(b []byte) { copy(b[end:], rec[:recHeaderSize]) },
		"torn payload":       func(b []byte) { copy(b[end:], rec[:len(rec)-2]) },
	} {
		t.Run(name, func(t *testing.T) {
			d := copyDir(t, dir)
			b := append([]byte(nil), clean...)
			tear(b)
			p := filepath.Join(d, filepath.Base(path))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			r := checkAll(t, d, map[string]*model{"g": m})
			if err := r.Group("g").StoreLog(entry("g", 11, 2)); err != nil {
				t.Fatal(err)
			}
			r.Close()
			m2 := *m
			m2.logs = append(append([]*raft.Log(nil), m.logs...), entry("g", 11, 2))
			checkAll(t, d, map[string]*model{"g": &m2})
		})
	}
	// Damage followed by a whole record is not a torn write, zeros or not.
	t.Run("damage before the last record", func(t *testing.T) {
		d := copyDir(t, dir)
		b := append([]byte(nil), clean...)
		_, n, _ := parseRecord(b[lastRecord(b):], fileSalt(b))
		b[end-int64(n)-3] ^= 0x40 // inside the second last record
		if err := os.WriteFile(filepath.Join(d, filepath.Base(path)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(d, Options{}); err == nil {
			t.Fatal("opened a log whose acknowledged record is damaged")
		}
	})
}

// Only the last segment may end in zeros: rotation trims the one it
// leaves, so replay of an older segment meets its last record at its end.
func TestRotationTrimsPreallocation(t *testing.T) {
	dir := t.TempDir()
	s, err := openWith(dir, Options{SegmentSize: 2048, MaxSegments: 100}, (&allocOps{}).ops())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := uint64(1); i <= 300; i++ {
		if err := s.Group("g").StoreLog(entry("g", i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	files := segFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("segments = %v", files)
	}
	for _, f := range files[:len(files)-1] {
		data, _ := os.ReadFile(f)
		if end := recordsEnd(data); end != int64(len(data)) {
			t.Errorf("%s: %d bytes, records end at %d", filepath.Base(f), len(data), end)
		}
	}
	if last := files[len(files)-1]; fileSize(t, last) < preallocChunk {
		t.Errorf("the active segment is not preallocated")
	}
}

// A filesystem that cannot preallocate (or a full disk) leaves appends to
// extend the file, as they did before preallocation.
func TestPreallocationIsBestEffort(t *testing.T) {
	a := &allocOps{}
	a.fail.Store(true)
	dir := t.TempDir()
	s, err := openWith(dir, Options{}, a.ops())
	if err != nil {
		t.Fatal(err)
	}
	m := newModel()
	for i := uint64(1); i <= 20; i++ {
		ls := entries("g", i, i, 1)
		if err := s.Group("g").StoreLogs(ls); err != nil {
			t.Fatal(err)
		}
		m.store(ls)
	}
	data, _ := os.ReadFile(onlySegment(t, dir))
	if end := recordsEnd(data); end != int64(len(data)) {
		t.Errorf("file is %d bytes, records end at %d", len(data), end)
	}
	if a.calls.Load() < 20 {
		t.Errorf("%d preallocation attempts for 20 appends: a failure should be retried on the next flush", a.calls.Load())
	}
	s.Close()
	checkAll(t, dir, map[string]*model{"g": m})
}

// lastRecord is the offset of a segment's last whole record.
func lastRecord(data []byte) int {
	off, last := fileBody(data), fileBody(data)
	for off < len(data) {
		_, n, err := parseRecord(data[off:], fileSalt(data))
		if err != nil {
			break
		}
		last, off = off, off+n
	}
	return last
}
