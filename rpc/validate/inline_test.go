package validate

import (
	"testing"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

func TestInlineSharesEqualLimits(t *testing.T) {
	a := window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: 1e9}
	b := a
	b.Burst = 1 // differs in one field only
	var in Inline
	pa := in.Policy(a)
	if got := in.Policy(a); got != pa {
		t.Error("an equal limit got a new policy")
	}
	pB := in.Policy(b)
	if pB == pa {
		t.Fatal("limits differing in Burst share a policy")
	}
	if pB.Limits[0].Limit != b || pa.Limits[0].Limit != a || len(pa.Limits) != 1 {
		t.Errorf("policies %+v and %+v do not hold their limits", pa, pB)
	}
}

// The first limits are shared; past what an Inline remembers, each limit
// still gets a policy of its own limit.
func TestInlinePastItsSizeStillAnswersRight(t *testing.T) {
	var in Inline
	first := map[int64]*policy.Policy{}
	for round := 0; round < 2; round++ {
		for n := int64(1); n <= 2*maxInline; n++ {
			l := window.Limit{Algorithm: window.FixedWindow, Limit: n, Window: 1e9}
			p := in.Policy(l)
			if p.Limits[0].Limit != l {
				t.Fatalf("limit %d: got policy of %+v", n, p.Limits[0].Limit)
			}
			if round == 0 {
				first[n] = p
				continue
			}
			if n <= maxInline && first[n] != p {
				t.Errorf("limit %d: not shared", n)
			}
		}
	}
}

func TestNilInlineSharesNothing(t *testing.T) {
	var in *Inline
	l := window.Limit{Algorithm: window.TokenBucket, Limit: 5, Window: 1e9}
	//lint:ignore SA4000 two calls must not share a policy
	if in.Policy(l) == in.Policy(l) {
		t.Error("a nil Inline shared a policy")
	}
}
