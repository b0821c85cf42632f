package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// openT opens a store in dir and closes it when the test ends.
func openT(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// entry is a test entry of group g at index i, with every field set so a
// round trip checks them all.
func entry(g string, i, term uint64) *raft.Log {
	return &raft.Log{
		Index:      i,
		Term:       term,
		Type:       raft.LogCommand,
		Data:       fmt.Appendf(nil, "%s/%d/%d", g, i, term),
		Extensions: []byte{byte(i)},
		AppendedAt: time.Unix(1_700_000_000, int64(i)),
	}
}

// entries returns entries [from, to] of term.
func entries(g string, from, to, term uint64) []*raft.Log {
	var ls []*raft.Log
	for i := from; i <= to; i++ {
		ls = append(ls, entry(g, i, term))
	}
	return ls
}

func sameLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Extensions, b.Extensions) &&
		a.AppendedAt.Equal(b.AppendedAt)
}

// model is the reference a group must match: a contiguous log and keys.
type model struct {
	first uint64
	logs  []*raft.Log
	kv    map[string]string
}

func newModel() *model { return &model{kv: map[string]string{}} }

func (m *model) last() uint64 {
	if len(m.logs) == 0 {
		return 0
	}
	return m.first + uint64(len(m.logs)) - 1
}

func (m *model) firstIndex() uint64 {
	if len(m.logs) == 0 {
		return 0
	}
	return m.first
}

func (m *model) store(ls []*raft.Log) {
	if len(m.logs) == 0 {
		m.first = ls[0].Index
	}
	m.logs = append(m.logs, ls...)
}

func (m *model) deleteRange(min, max uint64) {
	f, l := m.firstIndex(), m.last()
	switch {
	case l == 0 || max < f || min > l:
	case min <= f && max >= l:
		m.logs = nil
	case min <= f:
		m.logs = m.logs[max-f+1:]
		m.first = max + 1
	default:
		m.logs = m.logs[:min-f]
	}
}

// checkGroup fails unless g holds exactly what m does.
func checkGroup(t testing.TB, g *Group, m *model) {
	t.Helper()
	fi, err := g.FirstIndex()
	if err != nil || fi != m.firstIndex() {
		t.Fatalf("%s: FirstIndex = %d, %v; want %d", g.name, fi, err, m.firstIndex())
	}
	li, err := g.LastIndex()
	if err != nil || li != m.last() {
		t.Fatalf("%s: LastIndex = %d, %v; want %d", g.name, li, err, m.last())
	}
	var bytes int64
	for _, l := range m.logs {
		bytes += int64(len(appendEntry(nil, l)))
	}
	if n, b := g.Size(); n != len(m.logs) || b != bytes {
		t.Fatalf("%s: Size = %d entries of %d bytes; want %d of %d", g.name, n, b, len(m.logs), bytes)
	}
	for i, want := range m.logs {
		var got raft.Log
		if err := g.GetLog(m.first+uint64(i), &got); err != nil || !sameLog(&got, want) {
			t.Fatalf("%s: GetLog(%d) = %+v, %v; want %+v", g.name, m.first+uint64(i), got, err, want)
		}
	}
	for _, idx := range []uint64{m.firstIndex() - 1, m.last() + 1} {
		var got raft.Log
		if err := g.GetLog(idx, &got); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("%s: GetLog(%d) outside the log = %v; want ErrLogNotFound", g.name, idx, err)
		}
	}
	for k, want := range m.kv {
		got, err := g.Get([]byte(k))
		if err != nil || string(got) != want {
			t.Fatalf("%s: Get(%q) = %q, %v; want %q", g.name, k, got, err, want)
		}
	}
}

// segFiles lists the segment files of dir.
func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// copyDir copies the flat directory src to a new temporary one.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// settle returns once the flusher has finished the housekeeping (rotation,
// GC) of every write acknowledged so far: it runs after the answers.
func settle(t testing.TB, s *Store) {
	t.Helper()
	if err := s.commit(nil, record{}); err != nil {
		t.Fatal(err)
	}
}

// segCount is the number of segment files once s has settled.
func segCount(t testing.TB, s *Store) int {
	t.Helper()
	settle(t, s)
	return len(segFiles(t, s.dir))
}

// pageSpanning is entry index of group g with 12 KiB of data that is not
// zeros: its record spans pages, and a lost page shows.
func pageSpanning(g string, index uint64) *raft.Log {
	l := entry(g, index, 1)
	l.Data = make([]byte, 3*4096)
	for i := range l.Data {
		l.Data[i] = byte(i%251 + 1)
	}
	return l
}

// fileSalt is the salt of the records of a segment's bytes (0 in a segV1
// segment or one whose header is lost).
func fileSalt(data []byte) uint32 {
	salt, _, _, _ := checkSegHeader(data, binary.LittleEndian.Uint32(data[8:]))
	return salt
}

// fileBody is where the records of a segment's bytes start (past its
// header, and fence in a segV3 segment).
func fileBody(data []byte) int {
	_, body, _, _ := checkSegHeader(data, binary.LittleEndian.Uint32(data[8:]))
	return body
}

// storedThree is a closed log in a new dir holding group a's entries 1 to
// 3: its dir, its segment's path and that segment's bytes.
func storedThree(t *testing.T) (dir, path string, data []byte) {
	t.Helper()
	dir = t.TempDir()
	s := openT(t, dir, Options{})
	if err := s.Group("a").StoreLogs(entries("a", 1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path = filepath.Join(dir, segName(1))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return dir, path, data
}

// loseFirstPage zeroes, in data, the rest of the page holding offset from:
// a write starting there whose first page never reached the disk.
func loseFirstPage(data []byte, from int) {
	clear(data[from:min(len(data), (from/4096+1)*4096)])
}

// reopenCut writes data over path, a torn version of storedThree's log, and
// checks that it opens with the torn write cut: group a holds entries 1 to
// 3, as before the write. The store is closed when the test ends.
func reopenCut(t *testing.T, dir, path string, data []byte) *Store {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open after a power cut during an unacknowledged write = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	m := newModel()
	m.store(entries("a", 1, 3, 1))
	checkGroup(t, s.Group("a"), m)
	return s
}
