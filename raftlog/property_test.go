package raftlog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/floodgate/floodgate/test/proptest"
	"github.com/hashicorp/raft"
)

// Random StoreLogs, DeleteRange, Set and Drop on several groups, with
// crashes at random points (some leaving a torn write behind), must leave
// every group exactly as an in-memory reference says, whatever the
// segment size does to rotation, GC and rewrites.
func TestPropertyMatchesReference(t *testing.T) {
	seeds, ops := proptest.Runs(24), 300
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runProperty(t, uint64(seed), ops)
		})
	}
}

func runProperty(t *testing.T, seed uint64, nops int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	opts := Options{SegmentSize: int64(512 + rng.IntN(4096)), MaxSegments: 2 + rng.IntN(3)}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	names := []string{"meta", "shard-0", "shard-1", "shard-2"}
	ms := map[string]*model{}
	for _, n := range names {
		ms[n] = newModel()
	}
	term := uint64(1)
	var history []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d after %v: %s", seed, history, fmt.Sprintf(format, args...))
	}
	for range nops {
		name := names[rng.IntN(len(names))]
		m, g := ms[name], s.Group(name)
		switch p := rng.IntN(100); {
		case p < 50: // append
			start := m.last() + 1
			if m.last() == 0 {
				start = 1 + uint64(rng.IntN(1000))
			}
			if rng.IntN(10) == 0 {
				term++
			}
			ls := entries(name, start, start+uint64(rng.IntN(5)), term)
			history = append(history, fmt.Sprintf("%s+%d..%d", name, start, ls[len(ls)-1].Index))
			if err := g.StoreLogs(ls); err != nil {
				fail("StoreLogs: %v", err)
			}
			m.store(ls)
		case p < 65: // head truncation (a snapshot)
			if m.last() == 0 {
				continue
			}
			upto := m.firstIndex() + uint64(rng.IntN(int(m.last()-m.firstIndex()+2)))
			history = append(history, fmt.Sprintf("%s-head..%d", name, upto))
			if err := g.DeleteRange(0, upto); err != nil {
				fail("DeleteRange head: %v", err)
			}
			m.deleteRange(0, upto)
		case p < 75: // tail truncation (a conflict)
			if m.last() == 0 {
				continue
			}
			from := m.firstIndex() + uint64(rng.IntN(int(m.last()-m.firstIndex()+1)))
			history = append(history, fmt.Sprintf("%s-tail%d..", name, from))
			if err := g.DeleteRange(from, m.last()+uint64(rng.IntN(3))); err != nil {
				fail("DeleteRange tail: %v", err)
			}
			m.deleteRange(from, m.last())
		case p < 85: // stable key
			k, v := fmt.Sprint("k", rng.IntN(3)), fmt.Sprint(rng.Uint64())
			history = append(history, name+"=")
			if err := g.Set([]byte(k), []byte(v)); err != nil {
				fail("Set: %v", err)
			}
			m.kv[k] = v
		case p < 88: // the replica moves away
			history = append(history, "drop "+name)
			if err := s.Drop(name); err != nil {
				fail("Drop: %v", err)
			}
			ms[name] = newModel()
		case p < 95: // crash and reopen
			history = append(history, "crash")
			s.Close()
			if rng.IntN(2) == 0 {
				tearWrite(t, rng, dir, name)
			}
			if s, err = Open(dir, opts); err != nil {
				fail("reopen: %v", err)
			}
		default:
			for n, m := range ms {
				checkGroup(t, s.Group(n), m)
			}
		}
	}
	s.Close()
	if s, err = Open(dir, opts); err != nil {
		fail("reopen: %v", err)
	}
	for n, m := range ms {
		checkGroup(t, s.Group(n), m)
	}
}

// tearWrite appends to the last segment a prefix of a record that was
// never acknowledged: what a crash in the middle of a write leaves.
func tearWrite(t *testing.T, rng *rand.Rand, dir, name string) {
	files := segFiles(t, dir)
	rec, _ := encodeEntries(recAppend, name, []*raft.Log{entry(name, 1<<40, 1)})
	// The write must lose a byte that is not zero: in a preallocated file
	// a record whose missing bytes are all zeros is whole on disk (a
	// write that landed but was never acknowledged, which Raft allows).
	last := bytes.LastIndexFunc(rec, func(r rune) bool { return r != 0 })
	cut := 1 + rng.IntN(max(1, last))
	path := files[len(files)-1]
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The write lands after the last record, where the next flush would
	// have written it: inside the file's preallocated zeros, if any.
	if _, err := f.WriteAt(rec[:cut], recordsEnd(data)); err != nil {
		t.Fatal(err)
	}
}

// recordsEnd is the offset just past a segment's last whole record.
func recordsEnd(data []byte) int64 {
	off := fileBody(data)
	for off < len(data) {
		_, n, err := parseRecord(data[off:], fileSalt(data))
		if err != nil {
			break
		}
		off += n
	}
	return int64(off)
}
