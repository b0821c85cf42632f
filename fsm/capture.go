package fsm

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/hashicorp/raft"
)

// errReleased is Persist's error after Release: the capture stopped
// keeping what applies changed, so it can no longer be completed.
var errReleased = errors.New("snapshot persisted after its release")

// captureStep is how many records a snapshot's capture looks at per hold
// of the shard's lock: 0.1-0.15 ms of encoding (BenchmarkSnapshotCapture),
// so an apply waits about that long at most, where a capture of every
// state at once held the lock for 4.5-6.2 ms at 33,000 states and
// 150-210 ms at a million.
const captureStep = 1024

// capture is a snapshot taken without stopping applies: copy on write at
// the grain of a record. Snapshot only notes the point in time (log time,
// the ownership record, how many record numbers exist); Persist then
// encodes the records a few at a time, each hold of the lock a short one.
// Meanwhile an apply that is about to change or free a record the capture
// has not reached encodes it first (keep), as it was, so the capture still
// holds every state as at its point in time. Records added after that
// point are not part of it, and the table does not move records (compact)
// while a capture is attached.
//
// Everything here runs under the shard's lock.
type capture struct {
	snap *shardSnapshot
	tab  *table
	// n0 is how many record numbers existed at the point in time: higher
	// ones are newer and never captured.
	n0 uint32
	// done has bit n set once record n is encoded, or needs no encoding
	// (it was free, or its state had expired, at the point in time).
	done []uint64
	next uint32 // the pass's position: records below it are done
	// sparse passes over cand, from ci on, instead of every record
	// number: the records of a slot watch (watch.go), for an export.
	sparse bool
	cand   []uint32
	ci     int
	// only, when not nil, says which identities the capture holds: a
	// part of the states (ExportSlots).
	only func(id string) bool
	// gone, when not nil, holds the slots gone at the point in time: their
	// records are orphans (orphans.go), left out.
	gone []bool
	err  error
	// live and bytes size the capture's buffers: the states live at the
	// point in time, and the last whole capture's size plus room.
	// Persist allocates them, not Snapshot, which holds the lock.
	live, bytes int
	reserved    bool // Persist has sized the buffers
	// scratch encodes one state at a time.
	scratch []byte
}

// maxCaptures is how many captures may be attached at once: raft's and a
// backup's, and one more. Beyond that the oldest is finished at once (a
// stop of applies, as before captures copied on write): raft releases
// every snapshot it takes, so only a leak could get there.
const maxCaptures = 3

// startCapture attaches a capture of the shard as it is now: of every
// live state, or with only non-nil, of those whose identity it accepts.
// s.mu must be held.
func (s *Shard) startCapture(only func(id string) bool) *capture {
	t := s.tab
	if len(t.caps) >= maxCaptures {
		t.caps[0].finish()
	}
	c := &capture{
		snap: &shardSnapshot{now: s.now},
		tab:  t,
		n0:   t.used,
		done: make([]uint64, (t.used+63)/64),
		only: only,
		gone: t.counts.goneSlots(),
	}
	if only == nil { // a part is sized as it grows
		c.live, c.bytes = t.live, s.snapSize
	}
	if s.own != nil {
		c.snap.own = appendOwnership(nil, s.own)
	}
	t.caps = append(t.caps, c)
	return c
}

// keep encodes record n as it is, unless that is done already or n is
// newer than the capture. The table calls it before it changes or frees a
// record, and the pass for every record in turn.
func (c *capture) keep(n uint32) {
	if n >= c.n0 || c.done[n/64]&(1<<(n%64)) != 0 {
		return
	}
	c.done[n/64] |= 1 << (n % 64)
	r := c.tab.rec(n)
	if r.id == "" || c.err != nil || (c.only != nil && !c.only(r.id)) || (c.gone != nil && c.gone[slotOfID(r.id, len(c.gone))]) {
		return
	}
	l, ok := shapeOf(r.id)
	if !ok {
		c.err = fmt.Errorf("%w: state identity", ErrCorrupt)
		return
	}
	if l.Expiry(&r.st) <= c.snap.now {
		return // expired at the point in time: not part of it
	}
	// The trim below changes the record: captures of an earlier point
	// in time keep it first. Later ones need not: what has aged out by
	// this log time has aged out by theirs.
	for _, o := range c.tab.caps {
		if o == c {
			break
		}
		o.keep(n)
	}
	// A peek at the capture's log time drops what has aged out (a
	// sliding log's old timestamps). Strict replicas drop it when they
	// check; replicas that replay fast hits only record. It never changes
	// an answer, and without it their snapshots would differ in dead
	// bytes. The record has not changed since that time (else it would
	// have been kept already), so this is the trim a capture of every
	// state at once would have made then.
	before := l.HeapBytes(&r.st)
	l.Check(&r.st, c.snap.now, 0)
	c.tab.resize(r, l.HeapBytes(&r.st)-before) // a ring shrunk or freed
	c.scratch = l.AppendState(c.scratch[:0], &r.st)
	c.snap.addEncoded(r.id, c.scratch)
}

// step encodes up to budget records of the pass; it reports whether the
// pass is over.
func (c *capture) step(budget int) bool {
	if c.sparse {
		for ; budget > 0 && c.ci < len(c.cand); budget-- {
			c.keep(c.cand[c.ci])
			c.ci++
		}
		return c.over()
	}
	for ; budget > 0 && c.next < c.n0; budget-- {
		c.keep(c.next)
		c.next++
	}
	return c.over()
}

// over reports whether the pass is over.
func (c *capture) over() bool {
	if c.sparse {
		return c.ci >= len(c.cand)
	}
	return c.next >= c.n0
}

// finish completes the pass at once and detaches the capture.
func (c *capture) finish() {
	c.step(math.MaxInt)
	c.detach()
}

// detach stops the table calling keep.
func (c *capture) detach() {
	c.tab.caps = slices.DeleteFunc(c.tab.caps, func(o *capture) bool { return o == c })
}

// attached reports whether the table still calls keep.
func (c *capture) attached() bool { return slices.Contains(c.tab.caps, c) }

// liveSnapshot is the raft.FSMSnapshot of a Shard: a capture that Persist
// completes before it writes.
type liveSnapshot struct {
	s *Shard
	c *capture
}

// Persist implements raft.FSMSnapshot: it completes the capture, a short
// hold of the lock at a time, then sorts and writes it without the lock.
func (l *liveSnapshot) Persist(sink raft.SnapshotSink) error {
	snap, err := l.complete()
	if err == nil {
		err = snap.writeTo(sink)
	}
	if err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// complete runs the capture's pass to its end and detaches it.
func (l *liveSnapshot) complete() (*shardSnapshot, error) {
	l.reserve()
	for {
		l.s.mu.Lock()
		if !l.c.attached() && !l.c.over() {
			l.s.mu.Unlock()
			return nil, errReleased
		}
		over := l.c.step(captureStep)
		if over {
			l.c.detach()
		}
		l.s.mu.Unlock()
		if over {
			break
		}
		runtime.Gosched() // let a waiting apply have the lock
	}
	if l.c.err != nil {
		return nil, l.c.err
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.c.tab == l.s.tab && l.c.only == nil {
		l.s.snapSize = len(l.c.snap.buf) + len(l.c.snap.buf)/8
	}
	return l.c.snap, nil
}

// reserve sizes the capture's buffers, once. For a large group they are
// megabytes to allocate and zero: that happens outside the lock, then
// what applies kept meanwhile is moved in.
func (l *liveSnapshot) reserve() {
	if l.c.reserved {
		return
	}
	l.c.reserved = true
	entries, buf := make([]snapEntry, 0, l.c.live), make([]byte, 0, l.c.bytes)
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	l.c.snap.entries = append(entries, l.c.snap.entries...)
	l.c.snap.buf = append(buf, l.c.snap.buf...)
}

// export completes capture c and returns its states, without the
// ownership record, in the shard snapshot format: a backup's or a slot
// move's.
func (s *Shard) export(c *capture) ([]byte, error) {
	snap, err := (&liveSnapshot{s: s, c: c}).complete()
	if err != nil {
		return nil, err
	}
	snap.own = nil // an export carries states only
	var w sliceWriter
	if err := snap.writeTo(&w); err != nil {
		return nil, err
	}
	return w, nil
}

// Release implements raft.FSMSnapshot: a capture not persisted stops
// costing applies anything.
func (l *liveSnapshot) Release() {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	l.c.detach()
}
