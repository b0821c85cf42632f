package fsm

import (
	"testing"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// A restore replaces a key's committed states, and the leader's fast
// overlay must follow: a busy key (a decision always on its way) was
// decided on its old copy for as long as the traffic went on, and a key
// restored at its limit admitted every check.
func TestARestoreReachesTheFastOverlayOfABusyKey(t *testing.T) {
	p := &policy.Policy{Name: "fast", Consistency: policy.Fast, Limits: []policy.Limit{
		{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: 5, Window: 600 * sec}},
	}}
	ts := int64(1_700_000_000) * sec
	// The backup: key u at its full limit.
	src := NewShard()
	var bh []Hit
	for i := 0; i < 5; i++ {
		bh = append(bh, Hit{Key: "u", Policy: p, Cost: 1, Time: ts, Outcome: policy.Admitted})
	}
	src.Apply(hitsLog(1, ts, bh...))
	backup, err := src.ExportAll()
	if err != nil {
		t.Fatal(err)
	}

	leader := NewShard()
	idx := uint64(1)
	// One fast decision in flight when the restore lands.
	res, gen, at := leader.FastEval(p, "u", 1, ts+sec, false)
	if !res.Allowed {
		t.Fatal("first denied")
	}
	inflight := []Hit{{Key: "u", Policy: p, Cost: 1, Time: at, Outcome: res.Outcome}}
	gens := []uint64{gen}
	idx++
	if err, _ := applyAt(t, leader, idx, EncodeRestore(backup)).(error); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for i := 0; i < 20; i++ {
		// A new check comes before the last batch is released: hot key.
		res, gen, at := leader.FastEval(p, "u", 1, ts+int64(2+i)*sec, false)
		if res.Allowed {
			admitted++
		}
		var next []Hit
		var ngens []uint64
		if res.Outcome != policy.Denied {
			next = append(next, Hit{Key: "u", Policy: p, Cost: 1, Time: at, Outcome: res.Outcome})
			ngens = append(ngens, gen)
		}
		idx++
		leader.Apply(hitsLog(idx, at, inflight...))
		for _, g := range gens {
			leader.ReleaseFast(p, "u", g)
		}
		inflight, gens = next, ngens
	}
	if admitted > 0 {
		t.Errorf("restored key at its limit admitted %d more fast checks", admitted)
	}
}
