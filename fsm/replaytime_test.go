package fsm

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// A fast decision made at 59.9 s, in minute 0, is counted in minute 0
// even when an entry stamped 60.1 s (a strict check of another key)
// commits before its hits: counted at the log's time, minute 0's ten
// checks used up minute 1 too, and fast and strict disagreed.
func TestFastHitsCountInTheWindowTheyWereDecidedIn(t *testing.T) {
	const s = int64(1e9)
	fast := &policy.Policy{Name: "fast", Consistency: policy.Fast, Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 10, Window: 60 * s}}}}
	other := inline(window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: 60 * s})
	leader := NewShard()
	base := int64(1_700_000_040) * s // a multiple of a minute
	var hits []Hit
	var gen uint64
	for range 10 {
		res, g, at := leader.FastEval(fast, "k", 1, base+59_900_000_000, false)
		if !res.Allowed {
			t.Fatalf("fast check in minute 0 denied: %+v", res)
		}
		gen = g
		hits = append(hits, Hit{Key: "k", Policy: fast, Cost: 1, Time: at, Outcome: res.Outcome})
	}
	// A strict check of another key, stamped 60.1s, commits before the
	// hits entry (flushed up to --fast-flush-interval later).
	leader.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeAllow(nil, base+60_100_000_000, []Check{{Key: "other", Policy: other, Cost: 1}})})
	leader.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: EncodeHits(nil, base+60_300_000_000, hits)})
	for range hits {
		leader.ReleaseFast(fast, "k", gen)
	}
	// Minute 1: the key has used nothing in it.
	res, _, _ := leader.FastEval(fast, "k", 1, base+60_500_000_000, false)
	if !res.Allowed || res.Remaining != 9 {
		t.Errorf("first check of minute 1: %+v; want allowed with 9 remaining (minute 0's 10 counted in minute 1)", res)
	}
	// The same decisions taken strict on a replica: minute 0's stay in it.
	strict := NewShard()
	for i := range 10 {
		strict.Apply(allowLog(uint64(i+1), base+59_900_000_000, Check{Key: "k", Policy: fast, Cost: 1}))
	}
	strict.Apply(allowLog(11, base+60_100_000_000, Check{Key: "other", Policy: other, Cost: 1}))
	r := strict.Apply(allowLog(12, base+60_500_000_000, Check{Key: "k", Policy: fast, Cost: 1})).([]policy.Result)[0]
	if r.Allowed != res.Allowed || r.Remaining != res.Remaining {
		t.Errorf("strict at 60.5s: %+v; fast: %+v", r, res)
	}
}

// The same on a sliding log: a denial's retry-after, read on the overlay
// (decided at 0 s), held only if the hits are counted at 0 s, not at the
// 0.4 s of an entry that committed first.
func TestFastHitsCountedLateKeepTheRetryAfter(t *testing.T) {
	const s = int64(1e9)
	fast := &policy.Policy{Name: "fast", Consistency: policy.Fast, Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: 60 * s}}}}
	other := inline(window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: 60 * s})
	leader := NewShard()
	base := int64(1_700_000_040) * s
	var hits []Hit
	var gen uint64
	for range 10 {
		res, g, at := leader.FastEval(fast, "k", 1, base, false)
		gen = g
		hits = append(hits, Hit{Key: "k", Policy: fast, Cost: 1, Time: at, Outcome: res.Outcome})
	}
	denied, _, _ := leader.FastEval(fast, "k", 1, base+1*s, false)
	leader.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeAllow(nil, base+400_000_000, []Check{{Key: "other", Policy: other, Cost: 1}})})
	leader.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: EncodeHits(nil, base+500_000_000, hits)})
	for range hits {
		leader.ReleaseFast(fast, "k", gen)
	}
	at := base + 1*s + denied.RetryAfter
	again, _, _ := leader.FastEval(fast, "k", 1, at, false)
	if !again.Allowed {
		t.Errorf("denied at 1s with retry after %v; the same check that much later: %+v", denied.RetryAfter, again)
	}
}
