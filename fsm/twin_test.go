package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/policy"
)

// cloneShard copies s's replicated state (log time, ownership, every
// record, orphans included) without changing s: states go through their
// encoding, which trims nothing, so the reference of a point in time can
// be taken of a copy while s itself is never read the way a capture
// reads it (stopTheWorld trims the states it encodes).
func cloneShard(t *testing.T, s *Shard) *Shard {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := NewShard()
	c.now = s.now
	if s.own != nil {
		o, err := readOwnership(appendOwnership(nil, s.own))
		if err != nil {
			t.Fatal(err)
		}
		c.own = o
	}
	s.tab.each(func(r *record) {
		l, _ := shapeOf(r.id)
		st, _, err := l.DecodeState(l.AppendState(nil, &r.st))
		if err != nil {
			t.Fatal(err)
		}
		c.tab.insert([]byte(r.id), st)
	})
	if c.own != nil {
		c.tab.countSlots(c.own)
	}
	return c
}

// pointInTime is what a snapshot of s taken now must write, read from a
// copy so that s is left as it is.
func pointInTime(t *testing.T, s *Shard) []byte {
	t.Helper()
	return stopTheWorld(t, cloneShard(t, s))
}

// checkLookups checks what every lookup relies on: each identity is held
// once, and a lookup of each live record finds it, whether the index is
// moving or not.
func checkLookups(t *testing.T, s *Shard) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]uint32{}
	for n := uint32(0); n < s.tab.used; n++ {
		id := s.tab.rec(n).id
		if id == "" {
			continue
		}
		if m, dup := seen[id]; dup {
			t.Fatalf("identity %q held by records %d and %d", id, m, n)
		}
		seen[id] = n
		if got, ok := s.tab.lookup([]byte(id)); !ok || got != n {
			t.Fatalf("lookup of record %d (moving index: %v) gave %d, %v", n, s.tab.old != nil, got, ok)
		}
	}
	if len(seen) != s.tab.live {
		t.Fatalf("%d live records counted, %d held", s.tab.live, len(seen))
	}
}

// failingSink fails its writes after a few bytes, as a full disk does.
type failingSink struct {
	memSink
	left int
}

func (f *failingSink) Write(p []byte) (int, error) {
	if len(p) > f.left {
		return 0, errors.New("disk full")
	}
	f.left -= len(p)
	return f.memSink.Write(p)
}

// pending is a raft snapshot taken and not yet persisted, with what it
// must write.
type pending struct {
	snap raft.FSMSnapshot
	want []byte
	at   int // len(log) at its point in time
}

// TestSnapshotsOfATwinThatNeverCaptures drives a replica that snapshots,
// backs up and exports, and a twin that applies the same log and never
// does: up to five raft snapshots outstanding at once (past maxCaptures),
// some released unpersisted, some whose Persist fails and is tried again,
// beside new keys (index moves), expiries (sweeps, reused record numbers,
// compaction), resets, restores, slot freezes, drops (orphans swept a few
// at a time), imports back and watches. Each snapshot must be what a copy
// of the twin held at its point in time, and the replicas must answer
// alike and end with identical states: what a capture trims of a state
// must not change its later snapshots.
func TestSnapshotsOfATwinThatNeverCaptures(t *testing.T) {
	forSeeds(t, 4, snapshotsOfATwin)
}

func snapshotsOfATwin(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 23))
	const slots = 8
	keys := []int{300, 4000, 20000}[seed%3]
	pols := samplePolicies()
	a, b := NewShard(), NewShard()
	var index uint64
	ts := int64(1_700_000_000) * sec
	// log is every entry applied, and nil for a raft Restore of older's
	// bytes at the time, so that a replica restored from a snapshot can
	// replay what followed it.
	var log [][]byte
	var restores [][]byte
	var answers []any
	var indexes []uint64
	apply := func(data []byte) any {
		log = append(log, data)
		index++
		l := &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
		ra, rb := a.Apply(l), b.Apply(l)
		if !sameAnswer(ra, rb) {
			t.Fatalf("entry %d type %d: %v vs twin %v", index, data[0], ra, rb)
		}
		answers, indexes = append(answers, ra), append(indexes, index)
		return ra
	}
	all := make([]uint32, slots)
	for i := range all {
		all[i] = uint32(i)
	}
	apply(EncodeInit(1, slots, all))
	slow := func() {
		a.tab.counts.step, b.tab.counts.step = 1+int(seed%4), 1+int(seed%4)
	}
	slow()
	key := func() string { return fmt.Sprintf("k%d", r.IntN(keys)) }
	move := uint64(1)
	frozen := map[uint32]uint64{}
	away := map[uint32]bool{}
	var snaps []pending
	var older []byte
	checked := 0
	persistOne := func(i int) {
		p := snaps[i]
		snaps = append(snaps[:i], snaps[i+1:]...)
		if r.IntN(4) == 0 { // a failed write, then raft's retry
			f := &failingSink{left: r.IntN(len(p.want))}
			if err := p.snap.Persist(f); err == nil || !f.cancelled {
				t.Fatalf("a failing Persist: %v, cancelled %v", err, f.cancelled)
			}
		}
		var sink memSink
		if err := p.snap.Persist(&sink); err != nil {
			t.Fatalf("Persist: %v", err)
		}
		p.snap.Release()
		if !bytes.Equal(sink.Bytes(), p.want) {
			t.Fatalf("entry %d: a snapshot differs from its point in time (%d vs %d bytes)", index, sink.Len(), len(p.want))
		}
		older = sink.Bytes()
		if r.IntN(4) == 0 {
			replayFrom(t, older, log[p.at:], answers[p.at:], indexes[p.at:], restores, b)
		}
		checked++
	}
	for step := 0; step < 1000; step++ {
		ts += int64(r.IntN(100)) * 1e6
		if r.IntN(120) == 0 {
			ts += 200 * sec // every window passes: states expire
		}
		if len(snaps) < 5 && r.IntN(25) == 0 {
			want := pointInTime(t, b)
			snap, err := a.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			snaps = append(snaps, pending{snap, want, len(log)})
		}
		switch op := r.IntN(40); {
		case op < 22:
			var checks []Check
			if r.IntN(25) == 0 { // a burst of new keys: the index grows, then compaction
				for j := range 1000 + r.IntN(3000) {
					checks = append(checks, Check{Key: fmt.Sprintf("b%d-%d", step, j), Policy: pols[3], Cost: 1})
				}
			}
			for j := r.IntN(40); j >= 0; j-- {
				p := pols[r.IntN(len(pols))]
				joined := len(checks) > 0 && checks[len(checks)-1].Policy == p && r.IntN(3) == 0
				checks = append(checks, Check{Key: key(), Policy: p, Cost: int64(r.IntN(3)), Joined: joined})
			}
			apply(EncodeAllow(nil, ts, checks))
		case op < 24:
			var hits []Hit
			for j := r.IntN(8); j >= 0; j-- {
				hits = append(hits, Hit{Key: key(), Policy: pols[r.IntN(len(pols))], Cost: 1, Time: ts,
					Outcome: policy.Outcome(r.IntN(5))})
			}
			apply(EncodeHits(nil, ts, hits))
		case op < 25:
			apply(EncodeReset(ts, key(), pols[r.IntN(len(pols))]))
		case op < 28:
			apply(EncodeTick(ts))
		case op < 30:
			x := uint32(r.IntN(slots))
			for len(frozen)+len(away) >= 2 && frozen[x] == 0 && !away[x] {
				x = uint32(r.IntN(slots)) // move the moves under way on
			}
			switch m, isFrozen := frozen[x]; {
			case away[x]:
				empty, _ := NewShard().ExportAll()
				move++
				apply(EncodeImport(move, 1, []uint32{x}, empty))
				delete(away, x)
			case isFrozen:
				ea, erra := a.ExportSlots(m, []uint32{x})
				eb, errb := b.ExportSlots(m, []uint32{x})
				if erra != nil || errb != nil || !bytes.Equal(ea, eb) {
					t.Fatalf("step %d: exports differ (%v, %v)", step, erra, errb)
				}
				switch r.IntN(3) {
				case 0:
					apply(EncodeImport(m, 1, []uint32{x}, ea))
				case 1:
					apply(EncodeDrop(m))
					away[x] = true
				default: // dropped, then back with its states
					apply(EncodeDrop(m))
					move++
					apply(EncodeImport(move, 1, []uint32{x}, ea))
				}
				delete(frozen, x)
			default:
				move++
				if r.IntN(3) != 0 {
					a.mu.Lock()
					if _, _, err := a.startWatch(move, []uint32{x}); err != nil {
						t.Fatal(err)
					}
					a.mu.Unlock()
				}
				apply(EncodeFreeze(move, []uint32{x}))
				frozen[x] = move
			}
		case op < 31:
			ea, erra := a.ExportAll()
			if erra != nil || !bytes.Equal(ea, exportOfTwin(t, b)) {
				t.Fatalf("step %d: a backup differs from the twin's states (%v)", step, erra)
			}
		case op < 32:
			o := NewShard()
			var checks []Check
			for range 4 {
				k := key()
				if x := uint32(hashing.ShardOf(k, slots)); frozen[x] == 0 && !away[x] {
					checks = append(checks, Check{Key: k, Policy: pols[r.IntN(len(pols))], Cost: 1})
				}
			}
			o.Apply(allowLog(1, ts, checks...))
			e, _ := o.ExportAll()
			apply(EncodeRestore(e))
		case op < 36:
			if len(snaps) > 0 {
				i := r.IntN(len(snaps))
				if r.IntN(3) == 0 {
					snaps[i].snap.Release() // raft gave up on it
					snaps = append(snaps[:i], snaps[i+1:]...)
				} else {
					persistOne(i)
				}
			}
		case op < 37:
			if older != nil && r.IntN(6) == 0 {
				log, answers, indexes = append(log, nil), append(answers, nil), append(indexes, 0)
				restores = append(restores, older)
				for _, s := range []*Shard{a, b} {
					if err := s.Restore(io.NopCloser(bytes.NewReader(older))); err != nil {
						t.Fatal(err)
					}
				}
				slow()
				frozen, away = slotsOf(a.Ownership(), slots)
				ts = max(ts, a.Stats().Now)
			}
		}
		a.mu.Lock()
		for _, w := range a.tab.watches {
			w.walk(a.tab, r.IntN(200))
		}
		for _, c := range a.tab.caps {
			c.step(r.IntN(80))
		}
		a.mu.Unlock()
		if step%97 == 0 {
			checkLookups(t, a)
			checkLookups(t, b)
			checkCounts(t, a)
			a.mu.Lock()
			for _, w := range a.tab.watches {
				if w.ready() {
					checkWatch(t, a.tab, w)
				}
			}
			a.mu.Unlock()
		}
	}
	for len(snaps) > 0 {
		persistOne(0)
	}
	if checked < 5 {
		t.Fatalf("only %d snapshots checked", checked)
	}
	if !bytes.Equal(pointInTime(t, a), pointInTime(t, b)) {
		t.Fatal("the capturing replica ended unlike its twin")
	}
}

// exportOfTwin is the backup a twin's states at this point make, read
// from a copy.
func exportOfTwin(t *testing.T, s *Shard) []byte {
	t.Helper()
	e, err := cloneShard(t, s).ExportAll()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// replayFrom restores a new replica from snap and applies log, the entries
// that followed it (nil: a raft Restore, of the next of restores that the
// whole log made): it must then hold what twin holds, as a node restarted
// from that snapshot would.
func replayFrom(t *testing.T, snap []byte, log [][]byte, answers []any, indexes []uint64, restores [][]byte, twin *Shard) {
	t.Helper()
	c := NewShard()
	if err := c.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for _, e := range log {
		if e == nil {
			skipped++
		}
	}
	restores = restores[len(restores)-skipped:]
	for i, e := range log {
		if e == nil {
			if err := c.Restore(io.NopCloser(bytes.NewReader(restores[0]))); err != nil {
				t.Fatal(err)
			}
			restores = restores[1:]
			continue
		}
		if got := c.Apply(&raft.Log{Index: indexes[i], Type: raft.LogCommand, Data: e}); !sameAnswer(got, answers[i]) {
			t.Fatalf("entry %d after the snapshot: the restored replica answered %v, the replicas that applied every entry %v", i, got, answers[i])
		}
	}
	if !bytes.Equal(pointInTime(t, c), pointInTime(t, twin)) {
		t.Fatalf("a replica restored from a snapshot and replaying the %d entries after it differs from its twin", len(log))
	}
}

// sameAnswer reports whether two replicas answered an entry alike: equal
// results, or errors that say the same.
func sameAnswer(x, y any) bool {
	ex, okx := x.(error)
	ey, oky := y.(error)
	if okx || oky {
		return okx && oky && ex.Error() == ey.Error()
	}
	return reflect.DeepEqual(x, y)
}
