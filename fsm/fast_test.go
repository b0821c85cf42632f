package fsm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

func hitsLog(index uint64, ts int64, hits ...Hit) *raft.Log {
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: EncodeHits(nil, ts, hits)}
}

// The leader decides fast checks on committed state plus what it answered
// but has not committed yet, so back-to-back checks never all pass; once
// the outcomes are replicated, leader and follower hold the same state and
// the overlay is gone.
func TestFastDecisionsSeeEachOtherAndReplicateExactly(t *testing.T) {
	leader, follower := NewShard(), NewShard()
	p := &policy.Policy{Name: "fast", Consistency: policy.Fast, Limits: []policy.Limit{
		{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 3, Window: 60 * sec}},
		{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 100, Calendar: window.CalendarDay}},
	}}
	ts := int64(1_700_000_000) * sec
	var hits []Hit
	var gens []uint64
	admitted := 0
	for i := 0; i < 5; i++ {
		res, gen, _ := leader.FastEval(p, "u", 1, ts+int64(i)*sec, false)
		if res.Allowed {
			admitted++
		}
		if res.Outcome != policy.Denied {
			hits = append(hits, Hit{Key: "u", Policy: p, Cost: 1, Time: ts + int64(i)*sec, Outcome: res.Outcome})
			gens = append(gens, gen)
		}
	}
	if admitted != 3 || leader.FastPending() != 2 || leader.Stats().States != 0 {
		t.Fatalf("admitted %d, overlay %d states, committed %d states", admitted, leader.FastPending(), leader.Stats().States)
	}
	entry := hitsLog(1, ts+5*sec, hits...)
	leader.Apply(entry)
	follower.Apply(entry)
	for _, gen := range gens {
		leader.ReleaseFast(p, "u", gen)
	}
	if leader.FastPending() != 0 {
		t.Fatalf("%d overlay states left after release", leader.FastPending())
	}
	if !bytes.Equal(snapshotBytes(t, leader), snapshotBytes(t, follower)) {
		t.Fatal("leader and follower differ after replicating the fast decisions")
	}
	// The committed state now denies, as the overlay did.
	if res, _, _ := leader.FastEval(p, "u", 1, ts+6*sec, false); res.Allowed {
		t.Fatal("a fourth request passed after the hits were committed")
	}
}

// A leader that dies with answered but unreplicated decisions loses them:
// the new leader admits again exactly that many, no more. This is fast
// mode's overshoot, bounded by what was pending.
func TestFastFailoverOvershootIsWhatWasPending(t *testing.T) {
	old, next := NewShard(), NewShard()
	p := &policy.Policy{Name: "fast", Consistency: policy.Fast, Limits: []policy.Limit{
		{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 5, Window: 60 * sec}},
	}}
	ts := int64(1_700_000_000) * sec
	var hits []Hit
	for i := 0; i < 5; i++ {
		res, _, _ := old.FastEval(p, "u", 1, ts, false)
		if !res.Allowed {
			t.Fatalf("request %d denied", i)
		}
		hits = append(hits, Hit{Key: "u", Policy: p, Cost: 1, Time: ts, Outcome: res.Outcome})
	}
	// Only the first three reached the log before the old leader died.
	next.Apply(hitsLog(1, ts, hits[:3]...))
	next.ResetFast()
	again := 0
	for i := 0; i < 10; i++ {
		if res, _, _ := next.FastEval(p, "u", 1, ts+sec, false); res.Allowed {
			again++
		}
	}
	if again != 2 {
		t.Fatalf("new leader admitted %d more, want exactly the 2 lost", again)
	}
}

// A reset forgets every state of a key under its policy, the reduced
// limit's included, and nothing else.
func TestResetForgetsOneKey(t *testing.T) {
	s := NewShard()
	p := &policy.Policy{Name: "p", Limits: []policy.Limit{
		{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 1, Window: 60 * sec}},
	}, Reduced: &policy.Limit{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 1, Window: 60 * sec}}}
	ts := int64(1_700_000_000) * sec
	res := s.Apply(allowLog(1, ts,
		Check{Key: "a", Policy: p, Cost: 1}, Check{Key: "a", Policy: p, Cost: 1},
		Check{Key: "b", Policy: p, Cost: 1})).([]policy.Result)
	if !res[0].Allowed || res[1].Outcome != policy.AdmittedReduced || s.Stats().States != 3 {
		t.Fatalf("results %+v, %d states", res, s.Stats().States)
	}
	if n := s.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: EncodeReset(ts, "a", p)}); n != 2 {
		t.Fatalf("reset removed %v states, want 2", n)
	}
	res = s.Apply(allowLog(3, ts, Check{Key: "a", Policy: p, Cost: 1}, Check{Key: "b", Policy: p, Cost: 1})).([]policy.Result)
	if res[0].Outcome != policy.Admitted || res[1].Outcome != policy.AdmittedReduced {
		t.Fatalf("after reset: %+v", res)
	}
}

// A reset counts only the states still live: an expired one is gone
// whether or not the sweeper reached it, and how far it got differs
// between replicas (Vet sweeps on one node only), so two replicas, one
// swept and one not, answer the same.
func TestResetCountsOnlyLiveStates(t *testing.T) {
	minute := &policy.Policy{Name: "m", Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 5, Window: 60 * sec}}}}
	ts := int64(1_700_000_000) * sec
	var answers []any
	for _, sweep := range []bool{false, true} {
		s := NewShard()
		s.Apply(allowLog(1, ts, Check{Key: "k", Policy: minute, Cost: 1}))
		if sweep { // log time passes the window, and the tick's sweep frees the state
			s.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: EncodeTick(ts + 120*sec)})
		}
		if got := s.Stats().States; got != map[bool]int{false: 1, true: 0}[sweep] {
			t.Fatalf("swept %v: %d states before the reset", sweep, got)
		}
		// The reset's own time passes the window: the unswept state is stale.
		answers = append(answers, s.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: EncodeReset(ts+120*sec, "k", minute)}))
		if got := s.Stats().States; got != 0 {
			t.Fatalf("swept %v: %d states after the reset", sweep, got)
		}
	}
	if answers[0] != 0 || answers[1] != 0 {
		t.Fatalf("reset of an expired state answered %v unswept and %v swept, want 0 both", answers[0], answers[1])
	}
}

// Hits carry the leader's elastic judgment: in a version 2 body, as a bit
// of the outcome byte. A batch without an elastic hit is still written as
// version 1, which older binaries read, and version 1 bodies still decode.
func TestHitsCarryElastic(t *testing.T) {
	p := &policy.Policy{Name: "e", Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 3, Window: sec}}}}
	plain := Hit{Key: "k", Policy: p, Cost: 1, Time: 5, Outcome: policy.DeniedCountedReduced}
	stretched := plain
	stretched.Elastic, stretched.Outcome = true, policy.Admitted
	v1 := EncodeHits(nil, 7, []Hit{plain})
	v2 := EncodeHits(nil, 7, []Hit{plain, stretched})
	if v1[1] != 1 || v2[1] != hitsVersion {
		t.Fatalf("versions %d and %d, want 1 and %d", v1[1], v2[1], hitsVersion)
	}
	e, err := decodeHits(v2[1:])
	if err != nil || len(e.hits) != 2 || e.hits[0].elastic || e.hits[0].outcome != policy.DeniedCountedReduced ||
		!e.hits[1].elastic || e.hits[1].outcome != policy.Admitted {
		t.Fatalf("version 2: %+v, %v", e.hits, err)
	}
	if e, err := decodeHits(v1[1:]); err != nil || e.hits[0].elastic || e.hits[0].outcome != policy.DeniedCountedReduced {
		t.Fatalf("version 1: %+v, %v", e.hits, err)
	}
	// Version 1 had no flag: the bit there is a corrupt outcome.
	bad := bytes.Clone(v1)
	bad[len(bad)-1] |= hitElastic
	if _, err := decodeHits(bad[1:]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 1 with the elastic bit: %v, want ErrCorrupt", err)
	}
}
