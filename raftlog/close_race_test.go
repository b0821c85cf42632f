package raftlog

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// Close racing with writers and readers: every write either succeeds (and
// is there after a reopen) or returns ErrClosed; nothing hangs or panics.
func TestCloseRacesWriters(t *testing.T) {
	for round := range 20 {
		dir := t.TempDir()
		s, err := Open(dir, Options{SegmentSize: 4096, MaxSegments: 2})
		if err != nil {
			t.Fatal(err)
		}
		const groups = 8
		acked := make([]uint64, groups)
		var wg sync.WaitGroup
		for gi := range groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprint("g", gi)
				g := s.Group(name)
				for i := uint64(1); ; i++ {
					err := g.StoreLog(entry(name, i, 1))
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("%s: %v", name, err)
						return
					}
					acked[gi] = i
					var l raft.Log
					g.GetLog(i, &l)
					if i%10 == 0 {
						g.DeleteRange(1, i-5)
					}
				}
			}()
		}
		if round%2 == 0 {
			settle(t, s)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		s2, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for gi := range groups {
			l, _ := s2.Group(fmt.Sprint("g", gi)).LastIndex()
			if l != acked[gi] {
				t.Errorf("round %d g%d: LastIndex %d after reopen; acked %d", round, gi, l, acked[gi])
			}
		}
		s2.Close()
	}
}
