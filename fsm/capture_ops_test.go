package fsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/cluster/hashing"
	"github.com/floodgate/floodgate/policy"
)

// TestCaptureUnderEveryOperation drives a capturing replica and a twin
// with identical entries (checks and sets, fast hits, resets, ticks,
// ownership freezes, imports and drops, backup restores) and identical
// leader-side calls (FastEval, FastEvalSet, ReleaseFast, Vet, ExportSlots,
// ExportAll, which captures beside the snapshot, raft Restore), stepping
// the capture's pass at random, over a few hundred keys or thousands. Each
// snapshot must be what a stop-the-world capture of the twin wrote at its
// point in time, and both must answer and end alike.
func TestCaptureUnderEveryOperation(t *testing.T) {
	forSeeds(t, 12, captureEveryOperation)
}

// captureEveryOperation is one random run of TestCaptureUnderEveryOperation.
func captureEveryOperation(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 11))
	const slots = 8
	keys := 200
	if seed%2 == 1 {
		keys = 6000
	}
	pols := samplePolicies()
	a, b := NewShard(), NewShard()
	var index uint64
	ts := int64(1_700_000_000) * sec
	apply := func(data []byte) {
		index++
		l := &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
		ra, rb := a.Apply(l), b.Apply(l)
		if fmt.Sprint(ra) != fmt.Sprint(rb) {
			t.Fatalf("entry %d type %d: %v vs twin %v", index, data[0], ra, rb)
		}
	}
	all := make([]uint32, slots)
	for i := range all {
		all[i] = uint32(i)
	}
	apply(EncodeInit(1, slots, all))
	// A third of the runs sweep the states of dropped slots a few records
	// at a time, so that snapshots, exports and imports meet them.
	orphanStep := 0
	if seed%3 == 0 {
		orphanStep = 1 + r.IntN(4)
	}
	slowOrphans := func() {
		if orphanStep > 0 {
			a.tab.counts.step, b.tab.counts.step = orphanStep, orphanStep
		}
	}
	slowOrphans()
	away := map[uint32]bool{} // slots dropped and not imported back
	key := func() string { return fmt.Sprintf("k%d", r.IntN(keys)) }
	type gh struct {
		p   *policy.Policy
		key string
		gen uint64
	}
	var pendingA, pendingB []gh
	var pendingHits []Hit
	move := uint64(1)
	frozen := map[uint32]uint64{}
	var snap raft.FSMSnapshot
	var want []byte
	var older []byte // a persisted snapshot, for raft Restore
	captured, orphansCaptured := 0, 0
	for step := 0; step < 3000; step++ {
		ts += int64(r.IntN(400)) * 1e6
		if r.IntN(60) == 0 {
			ts += 90 * sec
		}
		if snap == nil && r.IntN(40) == 0 {
			want = stopTheWorld(t, b)
			var err error
			if snap, err = a.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		op := r.IntN(24)
		switch {
		case op < 8: // strict checks
			var checks []Check
			for j := r.IntN(6) + 20*int(seed%2); j >= 0; j-- {
				p := pols[r.IntN(len(pols))]
				joined := len(checks) > 0 && checks[len(checks)-1].Policy == p && r.IntN(2) == 0
				checks = append(checks, Check{Key: key(), Policy: p, Cost: int64(r.IntN(3)), Elastic: r.IntN(2) == 0, Joined: joined})
			}
			apply(EncodeAllow(nil, ts-int64(r.IntN(2))*sec, checks))
		case op < 12: // fast checks on both (leader views)
			p := pols[r.IntN(len(pols))]
			k := key()
			cost := int64(1 + r.IntN(2))
			ra, ga, na := a.FastEval(p, k, cost, ts, false)
			rb, gb, _ := b.FastEval(p, k, cost, ts, false)
			if fmt.Sprint(ra) != fmt.Sprint(rb) {
				t.Fatalf("step %d FastEval: %v vs twin %v", step, ra, rb)
			}
			if ra.Outcome != policy.Denied {
				pendingA = append(pendingA, gh{p, k, ga})
				pendingB = append(pendingB, gh{p, k, gb})
				pendingHits = append(pendingHits, Hit{Key: k, Policy: p, Cost: cost, Time: na, Outcome: ra.Outcome})
			}
		case op < 13:
			p := pols[r.IntN(len(pols))]
			ks := []string{key(), key(), key()}
			cs := []int64{1, 2, 1}
			oa, ha, ga := a.FastEvalSet(p, ks, cs, ts, false)
			ob, hb, gb := b.FastEvalSet(p, ks, cs, ts, false)
			if fmt.Sprint(oa, ha) != fmt.Sprint(ob, hb) {
				t.Fatalf("step %d FastEvalSet differs", step)
			}
			for _, h := range ha {
				pendingA = append(pendingA, gh{p, h.Key, ga})
				pendingB = append(pendingB, gh{p, h.Key, gb})
				pendingHits = append(pendingHits, h)
			}
		case op < 15: // replicate the pending fast hits, then release
			if len(pendingHits) > 0 {
				apply(EncodeHits(nil, ts, pendingHits))
				for i := range pendingA {
					a.ReleaseFast(pendingA[i].p, pendingA[i].key, pendingA[i].gen)
					b.ReleaseFast(pendingB[i].p, pendingB[i].key, pendingB[i].gen)
				}
				pendingA, pendingB, pendingHits = nil, nil, nil
			}
		case op < 16:
			p := pols[r.IntN(len(pols))]
			checks := []Check{{Key: key(), Policy: p, Cost: 1}, {Key: key(), Policy: p, Cost: 1}}
			max := a.Stats().States + r.IntN(3) - 1
			va, da := a.Vet(checks, Room{States: max}, nil)
			vb, db := b.Vet(checks, Room{States: max}, nil)
			a.Release(da)
			b.Release(db)
			if va != vb || da.States != db.States { // bytes follow each replica's rings
				t.Fatalf("step %d Vet: %v %+v vs twin %v %+v", step, va, da, vb, db)
			}
		case op < 17:
			apply(EncodeReset(ts, key(), pols[r.IntN(len(pols))]))
		case op < 18:
			apply(EncodeTick(ts))
		case op < 19: // freeze a slot, export it, then import it back or drop it
			x := uint32(r.IntN(slots))
			if away[x] { // the slot comes back, empty
				empty, _ := NewShard().ExportAll()
				move++
				apply(EncodeImport(move, 1, []uint32{x}, empty))
				delete(away, x)
			} else if m, ok := frozen[x]; ok {
				ea, erra := a.ExportSlots(m, []uint32{x})
				eb, errb := b.ExportSlots(m, []uint32{x})
				if fmt.Sprint(erra) != fmt.Sprint(errb) || !bytes.Equal(ea, eb) {
					t.Fatalf("step %d ExportSlots differs: %v %v", step, erra, errb)
				}
				if erra != nil {
					t.Fatal(erra)
				}
				if r.IntN(2) == 0 {
					apply(EncodeImport(m, 1, []uint32{x}, ea))
				} else if apply(EncodeDrop(m)); r.IntN(2) == 0 {
					empty, _ := NewShard().ExportAll()
					move++
					apply(EncodeImport(move, 1, []uint32{x}, empty))
				} else {
					away[x] = true
				}
				delete(frozen, x)
			} else {
				move++
				if r.IntN(4) != 0 { // one replica watches the slot (watch.go)
					a.mu.Lock()
					if _, _, err := a.startWatch(move, []uint32{x}); err != nil {
						t.Fatal(err)
					}
					a.mu.Unlock()
				}
				apply(EncodeFreeze(move, []uint32{x}))
				frozen[x] = move
			}
		case op < 20: // a backup restore of some keys
			o := NewShard()
			var checks []Check
			for j := 0; j < 5; j++ {
				k := key()
				x := uint32(hashing.ShardOf(k, slots))
				if _, f := frozen[x]; f || away[x] {
					continue
				}
				checks = append(checks, Check{Key: k, Policy: pols[r.IntN(len(pols))], Cost: 1})
			}
			o.Apply(allowLog(1, ts, checks...))
			e, err := o.ExportAll()
			if err != nil {
				t.Fatal(err)
			}
			apply(EncodeRestore(e))
		case op < 21:
			ea, erra := a.ExportAll()
			eb, errb := b.ExportAll()
			if erra != nil || errb != nil || !bytes.Equal(ea, eb) {
				t.Fatalf("step %d ExportAll differs (%v %v)", step, erra, errb)
			}
		case op < 22:
			if older != nil && r.IntN(4) == 0 {
				for _, s := range []*Shard{a, b} {
					if err := s.Restore(io.NopCloser(bytes.NewReader(older))); err != nil {
						t.Fatal(err)
					}
				}
				slowOrphans()
				a.ResetFast()
				b.ResetFast()
				pendingA, pendingB, pendingHits = nil, nil, nil
				frozen, away = slotsOf(a.Ownership(), slots) // the restored ownership
				// raft restores also move log time back, possibly
				if n := a.Stats().Now; n > ts {
					ts = n
				}
			}
		default:
		}
		a.mu.Lock()
		for _, w := range a.tab.watches {
			w.walk(a.tab, r.IntN(300))
			if w.ready() && step%50 == 0 {
				checkWatch(t, a.tab, w)
			}
		}
		a.mu.Unlock()
		for _, s := range []*Shard{a, b} {
			if got, want := s.Stats().Bytes, recountBytes(s); got != want {
				t.Fatalf("step %d (op %d): the table counts %d bytes, its records hold %d", step, op, got, want)
			}
			if drift := slotBytesDrift(s); drift != "" {
				t.Fatalf("step %d (op %d): %s", step, op, drift)
			}
		}
		if snap != nil {
			if a.Stats().Orphans > 0 {
				orphansCaptured++
			}
			stepCapture(a, r.IntN(60))
			if r.IntN(30) == 0 {
				got := persist(t, snap)
				if !bytes.Equal(got, want) {
					t.Fatalf("step %d: the snapshot differs from its point in time (%d vs %d bytes)", step, len(got), len(want))
				}
				older = got
				snap = nil
				captured++
			}
		}
	}
	if snap != nil {
		if got := persist(t, snap); !bytes.Equal(got, want) {
			t.Fatal("the last snapshot differs")
		}
	}
	if len(a.tab.caps) != 0 {
		t.Fatal("a capture is still attached")
	}
	if !bytes.Equal(stopTheWorld(t, a), stopTheWorld(t, b)) {
		t.Fatal("the capturing replica ended unlike its twin")
	}
	if captured < 3 {
		t.Fatalf("only %d snapshots", captured)
	}
	if a.sparseExports < 5 {
		t.Fatalf("only %d exports read a watch's list", a.sparseExports)
	}
	if orphanStep > 0 && orphansCaptured == 0 {
		t.Fatal("no capture ran beside orphans")
	}
}

// slotsOf reads info as the operation tests track slots: the move that
// froze each frozen one, and those away (neither owned nor frozen).
func slotsOf(info OwnershipInfo, slots int) (frozen map[uint32]uint64, away map[uint32]bool) {
	frozen, away = map[uint32]uint64{}, map[uint32]bool{}
	for m, xs := range info.Frozen {
		for _, x := range xs {
			frozen[x] = m
		}
	}
	owned := map[uint32]bool{}
	for _, x := range info.Owned {
		owned[x] = true
	}
	for x := range uint32(slots) {
		if _, f := frozen[x]; !f && !owned[x] {
			away[x] = true
		}
	}
	return frozen, away
}
