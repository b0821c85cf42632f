package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/policy/policytest"
	"github.com/floodgate/floodgate/test/proptest"
	"github.com/floodgate/floodgate/window"
)

// TestPropertyAtomicSets checks atomic sets, for every mode and algorithm,
// against the brute-force reference (policytest.CheckSet): random sets of
// one to four checks over three keys (a key may repeat), decided in one
// cmdAllow entry on a strict replica and by FastEvalSet on a fast leader
// whose hits are replicated to a follower. Every answer must be the
// reference's; a set is admitted whole or not at all; and at every flush
// the three replicas' snapshots must be byte-identical.
func TestPropertyAtomicSets(t *testing.T) {
	seqs, ops := proptest.Runs(4), 40
	for mi, m := range policytest.Modes {
		for ki, k := range policytest.Kinds {
			t.Run(m.Name+"/"+k.Name, func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(uint64(mi)<<8|uint64(ki), 0x5e7))
				for range seqs {
					runSets(t, rng, m, policytest.Policy(rng, m, k), ops)
				}
			})
		}
	}
}

func runSets(t *testing.T, rng *rand.Rand, m policytest.Mode, p *policy.Policy, ops int) {
	t.Helper()
	keys := []string{"a", "b", "c"}
	refs := []*policytest.Model{policytest.New(p), policytest.New(p), policytest.New(p)}
	strict := NewShard()
	f := &fastRun{t: t, leader: NewShard(), follower: NewShard()}
	var hist strings.Builder
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("mode %s, policy %+v\nlimits %+v reduced %+v\nhistory:\n%s%s", m.Name, *p, p.Limits, p.Reduced, hist.String(), fmt.Sprintf(format, args...))
	}
	index := uint64(0)
	for i, r := range policytest.Requests(rng, p, m, ops) {
		n := 1 + rng.IntN(4)
		idx, costs, names := make([]int, n), make([]int64, n), make([]string, n)
		checks := make([]Check, n)
		for j := range n {
			idx[j] = rng.IntN(len(keys))
			costs[j] = r.Cost
			if j > 0 && rng.IntN(2) == 0 {
				costs[j] = rng.Int64N(r.Cost + 2)
			}
			names[j] = keys[idx[j]]
			checks[j] = Check{Key: names[j], Policy: p, Cost: costs[j], Elastic: r.Elastic, Joined: j > 0}
		}
		if err := ValidateSets(checks); err != nil {
			fail("a well-made set refused: %v", err)
		}
		want := policytest.CheckSet(refs, idx, costs, r.Time, r.Elastic)
		index++
		out := strict.Apply(allowLog(index, r.Time, checks...))
		got, ok := out.([]policy.Result)
		if !ok {
			fail("strict: %v", out)
		}
		fmt.Fprintf(&hist, "  %d: keys %v costs %v at %d elastic %v -> %+v\n", i, names, costs, r.Time, r.Elastic, got)
		if len(got) != len(want) {
			fail("strict: %d answers to a set of %d", len(got), len(want))
		}
		admitted := 0
		for j := range want {
			if got[j] != want[j] {
				fail("strict, check %d: got %+v\nwant %+v", j, got[j], want[j])
			}
			if got[j].Allowed && !got[j].WouldDeny {
				admitted++
			}
		}
		if admitted != 0 && admitted != n {
			fail("strict: %d of %d checks of one set admitted", admitted, n)
		}
		fast, hits, gen := f.leader.FastEvalSet(p, names, costs, r.Time, r.Elastic)
		if len(fast) != len(want) {
			fail("fast: %d answers to a set of %d", len(fast), len(want))
		}
		for j := range want {
			if fast[j] != want[j] {
				fail("fast, check %d: got %+v\nwant %+v", j, fast[j], want[j])
			}
		}
		for _, h := range hits {
			f.pending = append(f.pending, h)
			f.gens = append(f.gens, gen)
		}
		if rng.IntN(3) == 0 || i == ops-1 {
			f.flush(r.Time)
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

// A set refused because one key is exhausted counts nothing on the others,
// and a set admitted counts on every key; a key given twice counts twice.
func TestAtomicSetExample(t *testing.T) {
	p := &policy.Policy{Name: "edge", Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 2, Window: 60e9}}}}
	s := NewShard()
	set := func(i uint64, keys ...string) []policy.Result {
		checks := make([]Check, len(keys))
		for j, k := range keys {
			checks[j] = Check{Key: k, Policy: p, Cost: 1, Joined: j > 0}
		}
		return s.Apply(allowLog(i, 1e9+int64(i), checks...)).([]policy.Result)
	}
	if r := set(1, "ip", "ip"); !r[0].Allowed || !r[1].Allowed || r[0].Remaining != 0 {
		t.Fatalf("ip twice: %+v", r)
	}
	if r := set(2, "user", "ip"); r[0].Allowed || r[1].Allowed || r[0].RetryAfter == 0 || r[0].RetryAfter != r[1].RetryAfter {
		t.Fatalf("ip exhausted: the set must be refused whole, with the wait of ip: %+v", r)
	}
	if r := set(3, "user", "user"); !r[0].Allowed || r[0].Remaining != 0 {
		t.Fatalf("user counted by the refused set: %+v", r)
	}
}

func TestValidateSets(t *testing.T) {
	p, q := &policy.Policy{Name: "p"}, &policy.Policy{Name: "q"}
	for _, tc := range []struct {
		name   string
		checks []Check
		want   string
	}{
		{"singles", []Check{{Key: "a", Policy: p}, {Key: "b", Policy: q}}, ""},
		{"a set and a single", []Check{{Key: "a", Policy: p}, {Key: "b", Policy: p, Joined: true}, {Key: "c", Policy: q}}, ""},
		{"joined first", []Check{{Key: "a", Policy: p, Joined: true}}, "checks[0]: joins a set with no check before it"},
		{"two policies", []Check{{Key: "a", Policy: p}, {Key: "b", Policy: q, Joined: true}}, "checks[1]: joins a set of another policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateSets(tc.checks)
			if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
				t.Fatalf("ValidateSets = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestValidatePolicies(t *testing.T) {
	lim := policy.Limit{Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 5, Window: int64(time.Minute)}}
	good := &policy.Policy{Name: "ok", Limits: []policy.Limit{lim}}
	badName := &policy.Policy{Name: "we ird!", Limits: []policy.Limit{lim}}
	logLim := policy.Limit{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: window.MaxLogLength, Window: int64(time.Hour)}}
	stretched := &policy.Policy{Name: "soft", Mode: policy.Soft, SoftPercent: 100, Limits: []policy.Limit{logLim}}
	for _, tc := range []struct {
		name   string
		checks []Check
		want   string
	}{
		{"good, shared", []Check{{Key: "a", Policy: good}, {Key: "b", Policy: good}}, ""},
		{"bad name after a good one", []Check{{Key: "a", Policy: good}, {Key: "b", Policy: badName}}, `checks[1].policy: name: "we ird!" must be`},
		{"a log stretched past the cap apply keeps", []Check{{Key: "a", Policy: stretched}}, "checks[0].policy: limits[0].limit: a sliding_log"},
		{"no policy", []Check{{Key: "a", Policy: good}, {Key: "b"}}, "checks[1]: no policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePolicies(tc.checks)
			if (err == nil) != (tc.want == "") || (err != nil && !strings.HasPrefix(err.Error(), tc.want)) {
				t.Fatalf("ValidatePolicies = %v, want %q", err, tc.want)
			}
			if err != nil && !errors.Is(err, window.ErrInvalid) && tc.name != "no policy" {
				t.Errorf("%v does not match window.ErrInvalid (InvalidArgument)", err)
			}
		})
	}
}
