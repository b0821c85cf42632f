package fsm

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/policy/policytest"
	"github.com/floodgate/floodgate/test/proptest"
)

// TestPropertyStrictAndFastAgree applies the same random requests, for
// every mode and algorithm, through strict mode (one cmdAllow entry each)
// and through fast mode (FastEval on a leader, hits replicated in random
// batches with EncodeHits to the leader and a follower, released late, and
// now and then a strict check mirrored into the leader's overlay). Every
// answer must be the brute-force reference's, and at every flush the three
// replicas must write byte-identical snapshots.
func TestPropertyStrictAndFastAgree(t *testing.T) {
	seqs, ops := proptest.Runs(10), 60
	for mi, m := range policytest.Modes {
		for ki, k := range policytest.Kinds {
			t.Run(m.Name+"/"+k.Name, func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(uint64(mi)<<8|uint64(ki), 0xfa57))
				for range seqs {
					runStrictFast(t, rng, m, policytest.Policy(rng, m, k), ops)
				}
			})
		}
	}
}

// fastRun is the fast-mode side of runStrictFast: a leader, a follower and
// the leader's hits on their way to the log.
type fastRun struct {
	t                *testing.T
	leader, follower *Shard
	index            uint64
	pending          []Hit
	gens             []uint64 // the generation of each pending hit
	unreleased       []Hit    // applied, not released yet
	unreleasedGens   []uint64
}

func (f *fastRun) apply(data []byte) interface{} {
	f.index++
	e := &raft.Log{Index: f.index, Type: raft.LogCommand, Data: data}
	got := f.leader.Apply(e)
	if other := f.follower.Apply(e); fmt.Sprint(other) != fmt.Sprint(got) {
		f.t.Fatalf("leader applied %v, follower %v", got, other)
	}
	return got
}

// flush replicates the pending hits in one entry stamped ts, or a tick
// when there are none, so log time moves on as on the strict replica.
func (f *fastRun) flush(ts int64) {
	if len(f.pending) == 0 {
		f.apply(EncodeTick(ts))
		return
	}
	if err, ok := f.apply(EncodeHits(nil, ts, f.pending)).(error); ok {
		f.t.Fatalf("hits entry refused: %v", err)
	}
	f.unreleased, f.unreleasedGens = append(f.unreleased, f.pending...), append(f.unreleasedGens, f.gens...)
	f.pending, f.gens = nil, nil
}

func (f *fastRun) release() {
	for i, h := range f.unreleased {
		f.leader.ReleaseFast(h.Policy, h.Key, f.unreleasedGens[i])
	}
	f.unreleased, f.unreleasedGens = nil, nil
}

func runStrictFast(t *testing.T, rng *rand.Rand, m policytest.Mode, p *policy.Policy, ops int) {
	t.Helper()
	keys := []string{"a", "b"}
	refs := map[string]*policytest.Model{}
	for _, k := range keys {
		refs[k] = policytest.New(p)
	}
	strict := NewShard()
	f := &fastRun{t: t, leader: NewShard(), follower: NewShard()}
	var hist strings.Builder
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("mode %s, policy %+v\nlimits %+v reduced %+v\nhistory:\n%s%s", m.Name, *p, p.Limits, p.Reduced, hist.String(), fmt.Sprintf(format, args...))
	}
	strictIndex := uint64(0)
	reqs := policytest.Requests(rng, p, m, ops)
	for i, r := range reqs {
		key := keys[rng.IntN(len(keys))]
		want := refs[key].Check(r.Time, r.Cost, r.Elastic)
		c := Check{Key: key, Policy: p, Cost: r.Cost, Elastic: r.Elastic}
		strictIndex++
		out := strict.Apply(allowLog(strictIndex, r.Time, c))
		if err, ok := out.(error); ok {
			fail("strict: %v", err)
		}
		got := out.([]policy.Result)[0]
		fmt.Fprintf(&hist, "  %d: key %s %v -> %+v\n", i, key, r, got)
		if got != want {
			fail("strict: got %+v\nwant %+v", got, want)
		}
		var fast policy.Result
		if len(f.pending) == 0 && rng.IntN(8) == 0 {
			// A strict check on the fast replicas (the policy switched to
			// strict): the leader mirrors it into its overlay.
			fast = f.apply(EncodeAllow(nil, r.Time, []Check{c})).([]policy.Result)[0]
			fmt.Fprintf(&hist, "     strict on the fast replicas\n")
		} else {
			var gen uint64
			var at int64
			fast, gen, at = f.leader.FastEval(p, key, r.Cost, r.Time, r.Elastic)
			if fast.Outcome != policy.Denied {
				f.pending = append(f.pending, Hit{Key: key, Policy: p, Cost: r.Cost, Time: at, Outcome: fast.Outcome, Elastic: r.Elastic})
				f.gens = append(f.gens, gen)
			}
		}
		if fast != want {
			fail("fast: got %+v\nwant %+v", fast, want)
		}
		until := int64(math.MinInt64)
		if len(f.pending) > 0 && i+1 < len(reqs) && rng.IntN(6) == 0 {
			until = min(reqs[i+1].Time, expiresFirst(t, f.follower, f.pending)-1)
		}
		if until >= r.Time {
			// Another entry (a strict check of another key, a tick)
			// commits before the hits, stamped up to the next request's
			// time: the hits still count when they were decided. (Up to
			// when a state they count on expires: past that, some
			// replicas may have freed it, and a hit counts on a fresh
			// state, as README says.)
			ts := r.Time + rng.Int64N(until-r.Time+1)
			f.apply(EncodeTick(ts))
			strictIndex++
			strict.Apply(&raft.Log{Index: strictIndex, Type: raft.LogCommand, Data: EncodeTick(ts)})
			fmt.Fprintf(&hist, "     an entry at %d before the hits\n", ts)
		}
		if rng.IntN(4) == 0 || i == ops-1 {
			f.flush(r.Time)
			fmt.Fprintf(&hist, "     flushed\n")
			s, l, fl := snapshotBytes(t, strict), snapshotBytes(t, f.leader), snapshotBytes(t, f.follower)
			if !bytes.Equal(s, l) || !bytes.Equal(s, fl) {
				fail("snapshots differ:\nstrict   %x\nleader   %x\nfollower %x", s, l, fl)
			}
		}
		if rng.IntN(3) == 0 {
			f.release()
		}
	}
	f.release()
	if n := f.leader.FastPending(); n != 0 {
		fail("%d overlay states left after every hit was released", n)
	}
}

// expiresFirst is the earliest time a state hits count on expires, on
// s's committed states with the hits counted one by one, in order.
func expiresFirst(t *testing.T, s *Shard, hits []Hit) int64 {
	t.Helper()
	scratch := NewShard()
	if err := scratch.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, s)))); err != nil {
		t.Fatal(err)
	}
	first := int64(math.MaxInt64)
	for i, h := range hits {
		first = min(first, scratch.firstExpiry(hits[i:i+1]))
		if err, ok := scratch.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: EncodeHits(nil, h.Time, hits[i:i+1])}).(error); ok {
			t.Fatal(err)
		}
		first = min(first, scratch.firstExpiry(hits[i:i+1]))
	}
	return first
}

// firstExpiry is the earliest expiry of the states hits count on, as s
// holds them (math.MaxInt64 if it holds none).
func (s *Shard) firstExpiry(hits []Hit) int64 {
	first := int64(math.MaxInt64)
	for _, h := range hits {
		for i := range h.Policy.States() {
			l, scope := limitOf(h.Policy, i)
			if n, ok := s.tab.lookup(appendID(nil, []byte(h.Key), scope, l)); ok {
				first = min(first, s.tab.rec(n).expiry())
			}
		}
	}
	return first
}
