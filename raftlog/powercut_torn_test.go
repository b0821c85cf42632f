package raftlog

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/floodgate/floodgate/test/proptest"
)

// tornDisk models what a power cut leaves of a directory written through
// fileOps: each file holds what it held at its last fsync, except that any
// 4 KiB page written since may or may not have reached the disk (writeback
// has no order), and a file's size may be anywhere between its synced and
// its current one (the new bytes read as zeros where their page was lost).
// Files created and never synced may be missing or empty.
type tornDisk struct {
	mu     sync.Mutex
	dir    string
	synced map[string][]byte
}

func (d *tornDisk) ops(onWrite func()) fileOps {
	def := defaultFileOps()
	return fileOps{
		write: func(f *os.File, p []byte, off int64) error {
			if err := def.write(f, p, off); err != nil {
				return err
			}
			onWrite() // the crash between the write and its fsync
			return nil
		},
		allocate: def.allocate,
		sync: func(f *os.File) error {
			if err := def.sync(f); err != nil {
				return err
			}
			b, err := os.ReadFile(f.Name())
			if err != nil {
				return err
			}
			d.mu.Lock()
			d.synced[filepath.Base(f.Name())] = b
			d.mu.Unlock()
			return nil
		},
	}
}

// cut writes into dst one state a power cut now could leave; the caller
// holds mu.
func (d *tornDisk) cut(t *testing.T, rng *rand.Rand, dst string) {
	t.Helper()
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), segSuffix) {
			continue
		}
		cur, err := os.ReadFile(filepath.Join(d.dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		old, ok := d.synced[e.Name()]
		if !ok && rng.IntN(2) == 0 {
			continue // its directory entry never reached the disk
		}
		lo, hi := len(old), len(cur)
		if lo > hi {
			lo, hi = hi, lo
		}
		n := lo + rng.IntN(hi-lo+1)
		out := make([]byte, n)
		copy(out, old)
		for p := 0; p < n; p += page {
			end := min(p+page, n)
			if p < len(cur) && rng.IntN(2) == 0 {
				copy(out[p:end], cur[p:min(end, len(cur))])
			}
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Power cuts between a write and its fsync, whose pages reach the disk in
// any order and any subset (torn writes, in appends, rotations and GC
// rewrites): the log must open, to the state after the acknowledged ops or
// after the one in flight, never to anything else (a lost acknowledged op,
// a deleted entry back, a wrong entry).
func TestPowerCutTornWrites(t *testing.T) {
	for seed := range proptest.Runs(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runTornCuts(t, uint64(seed), 100) })
	}
}

func runTornCuts(t *testing.T, seed uint64, nops int) {
	rng := rand.New(rand.NewPCG(seed, 29))
	crng := rand.New(rand.NewPCG(seed, 31))
	dir := t.TempDir()
	disk := &tornDisk{dir: dir, synced: map[string][]byte{}}
	var cuts []cutPoint
	acked := 0
	cutRoot := t.TempDir()
	onWrite := func() {
		disk.mu.Lock()
		defer disk.mu.Unlock()
		if crng.IntN(3) != 0 {
			return
		}
		cd := filepath.Join(cutRoot, fmt.Sprint(len(cuts)))
		if err := os.Mkdir(cd, 0o755); err != nil {
			t.Error(err)
			return
		}
		disk.cut(t, crng, cd)
		cuts = append(cuts, cutPoint{dir: cd, acked: acked})
	}
	opts := Options{SegmentSize: int64(2048 + rng.IntN(8192)), MaxSegments: 2 + rng.IntN(2)}
	s, err := openWith(dir, opts, disk.ops(onWrite))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	names := []string{"meta", "shard-0", "shard-1"}
	ms := map[string]*model{}
	for _, n := range names {
		ms[n] = newModel()
	}
	hist := []map[string]*model{snapModels(ms)}
	term := uint64(1)
	for range nops {
		name := names[rng.IntN(len(names))]
		m, g := ms[name], s.Group(name)
		var err error
		switch q := rng.IntN(100); {
		case q < 55:
			start := m.last() + 1
			if m.last() == 0 {
				start = 1 + uint64(rng.IntN(1000))
			}
			ls := entries(name, start, start+uint64(rng.IntN(4)), term)
			if rng.IntN(5) == 0 {
				ls[0] = pageSpanning(name, start) // spans pages: a lost page shows
				ls[0].Term = term
			}
			err = g.StoreLogs(ls)
			m.store(ls)
		case q < 70:
			if m.last() == 0 {
				continue
			}
			upto := m.firstIndex() + uint64(rng.IntN(int(m.last()-m.firstIndex()+2)))
			err = g.DeleteRange(m.firstIndex(), upto)
			m.deleteRange(m.firstIndex(), upto)
		case q < 82:
			// A conflicting suffix removed, rewritten at the same
			// indexes by a new term: the old entries must never return.
			if m.last() == 0 {
				continue
			}
			from := m.firstIndex() + uint64(rng.IntN(int(m.last()-m.firstIndex()+1)))
			err = g.DeleteRange(from, m.last())
			m.deleteRange(from, m.last())
			if err == nil {
				term++
				hist = append(hist, snapModels(ms))
				disk.mu.Lock()
				acked++
				disk.mu.Unlock()
				start := m.last() + 1
				if m.last() == 0 {
					start = from
				}
				ls := entries(name, start, start+uint64(rng.IntN(3)), term)
				err = g.StoreLogs(ls)
				m.store(ls)
			}
		case q < 95:
			k, v := fmt.Sprint("k", rng.IntN(3)), fmt.Sprint(rng.Uint64())
			err = g.Set([]byte(k), []byte(v))
			m.kv[k] = v
		default:
			err = s.Drop(name)
			ms[name] = newModel()
		}
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		hist = append(hist, snapModels(ms))
		if rng.IntN(4) == 0 {
			settle(t, s)
		}
		disk.mu.Lock()
		acked++
		disk.mu.Unlock()
	}
	settle(t, s)
	disk.mu.Lock()
	defer disk.mu.Unlock()
	if len(cuts) < 20 {
		t.Fatalf("only %d cuts: the test proves little", len(cuts))
	}
	for i, c := range cuts {
		cs, err := Open(c.dir, Options{})
		if err != nil {
			t.Fatalf("seed %d: cut %d after %d acknowledged ops: open: %v", seed, i, c.acked, err)
		}
		errs := matchCut(cs, hist, c.acked, c.acked)
		cs.Close()
		if errs != nil {
			t.Fatalf("seed %d: cut %d after %d acknowledged ops matches no allowed state: %v", seed, i, c.acked, errs)
		}
	}
}
