package policy_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/policy/policytest"
	"github.com/floodgate/floodgate/test/proptest"
	"github.com/floodgate/floodgate/window"
)

// TestPropertyPolicy drives random policies of every mode and every
// algorithm through random request sequences (time steps, costs with peeks,
// elastic room) and compares every answer, field by field, with the
// brute-force reference of the whole policy.
func TestPropertyPolicy(t *testing.T) {
	seqs, ops := proptest.Runs(20), 80
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
	runPolicyEdited(t, p, reqs, nil)
}

// runPolicyEdited is runPolicy calling edits[i] (which changes p, read by
// the policy and the reference alike) before request i.
func runPolicyEdited(t *testing.T, p *policy.Policy, reqs []policytest.Request, edits map[int]func()) {
	t.Helper()
	ref := policytest.New(p)
	st := make([]*window.State, p.States())
	for i := range st {
		st[i] = &window.State{}
	}
	var hist strings.Builder
	edited := false
	for i, r := range reqs {
		if edit := edits[i]; edit != nil {
			edit()
			edited = true // a lowered limit leaves a ring larger than its HeapMax
			fmt.Fprintf(&hist, "  edited: %s\n", describe(p))
		}
		bounds := make([]int, len(st))
		for j := range st {
			bounds[j] = p.HeapBound(j, st[j], r.Time, r.Cost)
		}
		got := p.Evaluate(st, r.Time, r.Cost, r.Elastic)
		for j := range st {
			// What the FSM judges --max-state-mib by, before a check.
			if h := stateLimit(p, j).HeapBytes(st[j]); h > bounds[j] || h > p.HeapMax(j) && !edited {
				t.Fatalf("policy %s\nhistory:\n%sstate %d holds %d bytes, HeapBound said %d, HeapMax %d", describe(p), hist.String(), j, h, bounds[j], p.HeapMax(j))
			}
		}
		want := ref.Check(r.Time, r.Cost, r.Elastic)
		fmt.Fprintf(&hist, "  %d: %v -> %+v\n", i, r, got)
		if got != want {
			t.Fatalf("policy %s\nhistory:\n%sgot  %+v\nwant %+v", describe(p), hist.String(), got, want)
		}
		if got.Remaining > got.Limit {
			// What a client reads, whatever the reference says.
			t.Fatalf("policy %s\nhistory:\n%sremaining %d over the limit %d", describe(p), hist.String(), got.Remaining, got.Limit)
		}
		if msg := checkRetry(p, st, r, got); msg != "" {
			t.Fatalf("policy %s\nhistory:\n%s%s", describe(p), hist.String(), msg)
		}
	}
}

// stateLimit is the limit of state i of p: Limits[i], then the reduced.
func stateLimit(p *policy.Policy, i int) *window.Limit {
	if i < len(p.Limits) {
		return &p.Limits[i].Limit
	}
	return &p.Reduced.Limit
}

// checkRetry checks what a client reads in a denial (or a shadow
// would-deny), whatever the reference says: the same request sent again
// RetryAfter later is admitted, and one nanosecond sooner it is not. It
// asks the policy itself, on copies of the states as the answer left
// them. Only a request some side can ever admit (every limit, or the
// reduced limit, holds its cost at this stretch) has such a time.
func checkRetry(p *policy.Policy, st []*window.State, r policytest.Request, got policy.Result) string {
	if got.Allowed && !got.WouldDeny || !admissible(p, r) {
		return ""
	}
	for _, at := range []int64{r.Time + got.RetryAfter - 1, r.Time + got.RetryAfter} {
		again := p.Evaluate(cloneStates(p, st), at, r.Cost, r.Elastic)
		if want := at == r.Time+got.RetryAfter; (again.Allowed && !again.WouldDeny) != want {
			return fmt.Sprintf("denied with retry after %d, but the same request at %d (%+d) answers %+v", got.RetryAfter, at, at-r.Time, again)
		}
	}
	return ""
}

// admissible reports whether a request can ever be admitted at its
// stretch: by every limit, or by the reduced limit.
func admissible(p *policy.Policy, r policytest.Request) bool {
	c, pct := max(r.Cost, 1), policytest.Stretch(p, r.Elastic)
	if p.Reduced != nil && c <= p.Reduced.Capacity() {
		return true
	}
	for i := range p.Limits {
		if c > policytest.Stretched(p.Limits[i].Limit, pct).Capacity() {
			return false
		}
	}
	return true
}

// cloneStates deep-copies a check's states through their encoding.
func cloneStates(p *policy.Policy, st []*window.State) []*window.State {
	out := make([]*window.State, len(st))
	for i, s := range st {
		var l *window.Limit
		if i < len(p.Limits) {
			l = &p.Limits[i].Limit
		} else {
			l = &p.Reduced.Limit
		}
		c, _, err := l.DecodeState(l.AppendState(nil, s))
		if err != nil {
			panic(err)
		}
		out[i] = &c
	}
	return out
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

// TestPropertyPolicyEdits is TestPropertyPolicy with the policy edited
// between requests, as `policy set` of a stored name does: a limit's
// value or burst changes and its counts stay (the shape, and so the
// state's identity, is the same). The reference reads the edited policy
// too.
func TestPropertyPolicyEdits(t *testing.T) {
	seqs, ops := proptest.Runs(5), 80
	for mi, m := range policytest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(mi), 0xed17))
			for range seqs {
				for _, k := range policytest.Kinds {
					p := policytest.Policy(rng, m, k)
					reqs := policytest.Requests(rng, p, m, ops)
					edits := map[int]func(){}
					for range 3 {
						edits[rng.IntN(ops)] = policytest.Edit(rng, p)
					}
					runPolicyEdited(t, p, reqs, edits)
				}
			}
		})
	}
}
