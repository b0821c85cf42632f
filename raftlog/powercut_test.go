package raftlog

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// powerCut remembers what each file held when it was last fsync'd: a
// power cut keeps exactly that (one outcome among those a real one may
// leave). Removals and creations are made durable by syncDir, which the
// store always calls, so the files present are the ones to keep.
type powerCut struct {
	mu     sync.Mutex
	synced map[string][]byte
}

func (p *powerCut) ops() fileOps {
	d := defaultFileOps()
	return fileOps{
		write: d.write,
		sync: func(f *os.File) error {
			if err := d.sync(f); err != nil {
				return err
			}
			b, err := os.ReadFile(f.Name())
			if err != nil {
				return err
			}
			p.mu.Lock()
			p.synced[filepath.Base(f.Name())] = b
			p.mu.Unlock()
			return nil
		},
	}
}

// cut writes to a new directory what a power cut now would leave of dir.
func (p *powerCut) cut(t *testing.T, dir string) string {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	dst := t.TempDir()
	for _, path := range segFiles(t, dir) {
		name := filepath.Base(path)
		b, ok := p.synced[name]
		if !ok {
			continue // created, never synced: lost
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// With NoSync a power cut may lose recent writes, but never entries that
// were on disk long before: rotation syncs even with NoSync for that. GC
// breaks it: it rewrites an idle group's entries into the active segment
// (not synced under NoSync), then deletes, durably, the old segment that
// held them. A power cut then loses the group's whole log, and the log
// replays to no prefix of what was written.
func TestNoSyncGCRewriteThenPowerCut(t *testing.T) {
	dir := t.TempDir()
	p := &powerCut{synced: map[string][]byte{}}
	s, err := openWith(dir, Options{NoSync: true, SegmentSize: 2048, MaxSegments: 3}, p.ops())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	idle, busy := s.Group("meta"), s.Group("shard-1")
	if err := idle.StoreLogs(entries("meta", 1, 5, 1)); err != nil {
		t.Fatal(err)
	}
	rewritten := false
	for i := uint64(1); i <= 800 && !rewritten; i++ {
		if err := busy.StoreLog(entry("shard-1", i, 1)); err != nil {
			t.Fatal(err)
		}
		if i%40 == 0 {
			if err := busy.DeleteRange(1, i-10); err != nil {
				t.Fatal(err)
			}
		}
		settle(t, s)
		s.mu.RLock()
		rewritten = s.groups["meta"].firstSeg() != 1 && s.segs[0].seq != 1
		s.mu.RUnlock()
	}
	if !rewritten {
		t.Fatal("the idle group was never rewritten forward: the test proves nothing")
	}
	crashed := p.cut(t, dir)
	s2, err := Open(crashed, Options{})
	if err != nil {
		t.Fatalf("open after the power cut: %v", err)
	}
	defer s2.Close()
	m := newModel()
	m.store(entries("meta", 1, 5, 1))
	// meta's entries were durable (their segment was synced at rotation)
	// before any of the writes the power cut may lose.
	checkGroup(t, s2.Group("meta"), m)
}

var _ = raft.ErrLogNotFound
