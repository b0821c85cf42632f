package raftlog

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/floodgate/floodgate/test/proptest"
	"github.com/hashicorp/raft"
)

// snapModels deep-copies the reference models.
func snapModels(ms map[string]*model) map[string]*model {
	out := map[string]*model{}
	for n, m := range ms {
		c := newModel()
		c.first = m.first
		c.logs = append([]*raft.Log(nil), m.logs...)
		c.kv = maps.Clone(m.kv)
		out[n] = c
	}
	return out
}

// diff says how s differs from ms (nil when it matches).
// matchCut returns nil when the log reopened after a cut, s, holds one of
// the states hist[lo..acked+1] (the acknowledged one or one in flight, or
// an earlier one where losing writes is allowed), newest first; else why
// each differed (empty, not nil, when there was none to compare).
func matchCut(s *Store, hist []map[string]*model, lo, acked int) []error {
	errs := []error{}
	for j := min(acked+1, len(hist)-1); j >= lo; j-- {
		e := diff(s, hist[j])
		if e == nil {
			return nil
		}
		errs = append(errs, e)
	}
	return errs
}

func diff(s *Store, ms map[string]*model) error {
	for n, m := range ms {
		g := s.Group(n)
		fi, _ := g.FirstIndex()
		li, _ := g.LastIndex()
		if fi != m.firstIndex() || li != m.last() {
			return fmt.Errorf("%s: [%d,%d], want [%d,%d]", n, fi, li, m.firstIndex(), m.last())
		}
		for i, want := range m.logs {
			var got raft.Log
			if err := g.GetLog(m.first+uint64(i), &got); err != nil || !sameLog(&got, want) {
				return fmt.Errorf("%s: entry %d: %v", n, m.first+uint64(i), err)
			}
		}
		for k, want := range m.kv {
			got, err := g.Get([]byte(k))
			if err != nil || string(got) != want {
				return fmt.Errorf("%s: key %s = %q, %v; want %q", n, k, got, err, want)
			}
		}
		st := s.groups[n]
		if st != nil && len(st.kv) != len(m.kv) {
			return fmt.Errorf("%s: %d keys, want %d", n, len(st.kv), len(m.kv))
		}
	}
	return nil
}

type cutPoint struct {
	dir   string
	acked int // ops acknowledged when the cut was taken
}

// Power cuts taken inside fsyncs (so also in the middle of rotation and
// GC): the log must open to the state after the acknowledged ops, or the
// one in flight. With NoSync, to the state after some prefix of them.
func TestPowerCutMidHousekeeping(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		for seed := range proptest.Runs(3) {
			t.Run(fmt.Sprint(noSync, seed), func(t *testing.T) { runCutMid(t, uint64(seed), 200, noSync) })
		}
	}
}

func runCutMid(t *testing.T, seed uint64, nops int, noSync bool) {
	rng := rand.New(rand.NewPCG(seed, 13))
	dir := t.TempDir()
	opts := Options{NoSync: noSync, SegmentSize: int64(512 + rng.IntN(2048)), MaxSegments: 2 + rng.IntN(2)}
	var mu sync.Mutex
	synced := map[string][]byte{}
	var cuts []cutPoint
	acked := 0
	nsync := 0
	cutRoot := t.TempDir()
	takeCut := func() { // mu held
		cd := filepath.Join(cutRoot, fmt.Sprint(len(cuts)))
		os.Mkdir(cd, 0o755)
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if b, ok := synced[e.Name()]; ok {
				os.WriteFile(filepath.Join(cd, e.Name()), b, 0o644)
			}
		}
		cuts = append(cuts, cutPoint{dir: cd, acked: acked})
	}
	d := defaultFileOps()
	ops := fileOps{
		write:    d.write,
		allocate: d.allocate,
		sync: func(f *os.File) error {
			if err := d.sync(f); err != nil {
				return err
			}
			b, _ := os.ReadFile(f.Name())
			mu.Lock()
			defer mu.Unlock()
			synced[filepath.Base(f.Name())] = b
			nsync++
			if nsync%5 == 0 {
				takeCut()
			}
			return nil
		},
	}
	s, err := openWith(dir, opts, ops)
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
	var history []string
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
			ls := entries(name, start, start+uint64(rng.IntN(4)), 1)
			history = append(history, fmt.Sprintf("%s+%d..%d", name, start, ls[len(ls)-1].Index))
			err = g.StoreLogs(ls)
			m.store(ls)
		case q < 75:
			if m.last() == 0 {
				continue
			}
			upto := m.firstIndex() + uint64(rng.IntN(int(m.last()-m.firstIndex()+2)))
			history = append(history, fmt.Sprintf("%s-head..%d", name, upto))
			err = g.DeleteRange(0, upto)
			m.deleteRange(0, upto)
		case q < 82:
			if m.last() == 0 {
				continue
			}
			from := m.firstIndex() + uint64(rng.IntN(int(m.last()-m.firstIndex()+1)))
			history = append(history, fmt.Sprintf("%s-tail%d..", name, from))
			err = g.DeleteRange(from, m.last())
			m.deleteRange(from, m.last())
		case q < 95:
			k, v := fmt.Sprint("k", rng.IntN(3)), fmt.Sprint(rng.Uint64())
			history = append(history, name+"="+k)
			err = g.Set([]byte(k), []byte(v))
			m.kv[k] = v
		default:
			history = append(history, "drop "+name)
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
		mu.Lock()
		acked++
		if rng.IntN(6) == 0 {
			takeCut()
		}
		mu.Unlock()
	}
	settle(t, s)
	mu.Lock()
	defer mu.Unlock()
	for _, c := range cuts {
		cs, err := Open(c.dir, Options{NoSync: true})
		if err != nil {
			t.Fatalf("seed %d noSync %v: cut after %d ops (%v): open: %v", seed, noSync, c.acked, history[:c.acked], err)
		}
		lo := c.acked
		if noSync {
			lo = 0
		}
		errs := matchCut(cs, hist, lo, c.acked)
		cs.Close()
		if errs != nil {
			t.Fatalf("seed %d noSync %v: cut after %d ops (last %v) matches no allowed state: %v",
				seed, noSync, c.acked, history[max(0, c.acked-5):min(len(history), c.acked+1)], errs[:min(3, len(errs))])
		}
	}
	_ = bytes.Equal
}
