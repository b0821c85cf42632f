package raftlog

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// ErrStalled is the failure of a log whose write or fsync has not
// returned within Options.MaxSyncDuration.
var ErrStalled = errors.New("disk stalled")

// Disk stalls. A disk that fails answers with an error and the log fails
// (Failed); a disk that hangs (a network volume losing its path, a
// controller resetting) answers nothing, and the writer waits in the
// kernel. A Raft leader whose log hangs keeps its followers' heartbeats
// going (raft sends them from other goroutines), so none of them stands
// for election and the leader's groups stop committing for as long as the
// disk hangs, with no failover. The stall watch fails the log once a write
// or fsync has been pending for MaxSyncDuration, as a failing disk does;
// the process then stops and its groups fail over to their other
// replicas (CockroachDB's storage.max_sync_duration does the same).

// stallWatch times the disk calls of the one goroutine that writes.
type stallWatch struct {
	// since is when the pending disk call began (UnixNano; 0: none).
	since atomic.Int64
}

// watched returns ops whose every call is timed by w.
func (w *stallWatch) watched(ops fileOps) fileOps {
	timed := ops
	timed.write = func(f *os.File, p []byte, off int64) error {
		defer w.begin()()
		return ops.write(f, p, off)
	}
	timed.sync = func(f *os.File) error {
		defer w.begin()()
		return ops.sync(f)
	}
	if ops.allocate != nil {
		timed.allocate = func(f *os.File, off, n int64) error {
			defer w.begin()()
			return ops.allocate(f, off, n)
		}
	}
	return timed
}

// begin marks a disk call pending and returns its end.
func (w *stallWatch) begin() (end func()) {
	w.since.Store(time.Now().UnixNano())
	return func() { w.since.Store(0) }
}

// pending is how long the pending disk call has run (0: none).
func (w *stallWatch) pending() time.Duration {
	at := w.since.Load()
	if at == 0 {
		return 0
	}
	return time.Since(time.Unix(0, at))
}

// watchStalls fails s once a disk call has been pending for max, looking
// four times per max: a stall is caught within 1.25 × max. It returns
// when s closes or fails.
func (s *Store) watchStalls(w *stallWatch, max time.Duration) {
	t := time.NewTicker(max / 4)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.failedCh:
			return
		case <-t.C:
		}
		if d := w.pending(); d >= max {
			s.fail(fmt.Errorf("%w: a write or fsync in %s has not returned after %s (max sync duration %s)",
				ErrStalled, s.dir, d.Round(time.Millisecond), max))
			return
		}
	}
}
