package fsm

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// An entry writes each distinct policy once, whether its checks share a
// pointer or carry equal copies, and every check still points at its own.
func TestEntriesWriteEqualPoliciesOnce(t *testing.T) {
	pol := func(limit int64) *policy.Policy {
		return &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: limit, Window: int64(time.Second)}}}}
	}
	a, b := pol(10), pol(11)
	checks := []Check{{Key: "k0", Policy: a, Cost: 1}, {Key: "k1", Policy: pol(10), Cost: 1}, {Key: "k2", Policy: b, Cost: 1}, {Key: "k3", Policy: a, Cost: 1}, {Key: "k4", Policy: pol(11), Cost: 1}}
	e, err := decodeAllow(EncodeAllow(nil, 1, checks)[1:])
	if err != nil {
		t.Fatal(err)
	}
	if len(e.policies) != 2 {
		t.Fatalf("%d policies written, want 2", len(e.policies))
	}
	for i, c := range e.checks {
		if got, want := e.policies[c.policy].Limits[0].Limit.Limit, checks[i].Policy.Limits[0].Limit.Limit; got != want {
			t.Errorf("check %d decodes with limit %d, want %d", i, got, want)
		}
	}
	hits := []Hit{{Key: "k0", Policy: a, Cost: 1}, {Key: "k1", Policy: pol(10), Cost: 1}}
	h, err := decodeHits(EncodeHits(nil, 1, hits)[1:])
	if err != nil {
		t.Fatal(err)
	}
	if len(h.policies) != 1 || h.hits[0].policy != 0 || h.hits[1].policy != 0 {
		t.Errorf("hits: %d policies, indexes %d and %d; want one, shared", len(h.policies), h.hits[0].policy, h.hits[1].policy)
	}
}
