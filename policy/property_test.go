package policy_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/policy/policytest"
	"github.com/floodgate/floodgate/window"
)

// TestPropertyPolicy drives random policies of every mode and every
// algorithm through random request sequences (time steps, costs with peeks,
// elastic room) and compares every answer, field by field, with the
// brute-force reference of the whole policy.
func TestPropertyPolicy(t *testing.T) {
	seqs, ops := 20, 80
	if testing.Short() {
		seqs /= 4
	}
	for mi, m := range policytest.Modes {
		for ki, k := range policytest.Kinds {
			t.Run(m.Name+"/"+k.Name, func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(uint64(mi), uint64(ki)))
				for range seqs {
					p := policytest.Policy(rng, m, k)
					runPolicy(t, p, policytest.Requests(rng, p, m, ops))
				}
			})
		}
	}
}

func runPolicy(t *testing.T, p *policy.Policy, reqs []policytest.Request) {
	t.Helper()
	ref := policytest.New(p)
	st := make([]*window.State, p.States())
	for i := range st {
		st[i] = &window.State{}
	}
	var hist strings.Builder
	for i, r := range reqs {
		got := p.Evaluate(st, r.Time, r.Cost, r.Elastic)
		want := ref.Check(r.Time, r.Cost, r.Elastic)
		fmt.Fprintf(&hist, "  %d: %v -> %+v\n", i, r, got)
		if got != want {
			t.Fatalf("policy %s\nhistory:\n%sgot  %+v\nwant %+v", describe(p), hist.String(), got, want)
		}
		if got.Remaining > got.Limit {
			// What a client reads, whatever the reference says.
			t.Fatalf("policy %s\nhistory:\n%sremaining %d over the limit %d", describe(p), hist.String(), got.Remaining, got.Limit)
		}
	}
}

// describe prints a policy with its limits spelled out.
func describe(p *policy.Policy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mode %d soft %d ceiling %d count_denied %v", p.Mode, p.SoftPercent, p.ElasticCeilingPercent, p.CountDenied)
	for i, l := range p.Limits {
		fmt.Fprintf(&b, "\n  limits[%d] %s %+v", i, l.Algorithm, l.Limit)
	}
	if p.Reduced != nil {
		fmt.Fprintf(&b, "\n  reduced %s %+v", p.Reduced.Algorithm, p.Reduced.Limit)
	}
	return b.String()
}
