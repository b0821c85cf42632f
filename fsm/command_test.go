package fsm

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// limitPolicy is a one-limit policy admitting limit a second.
func limitPolicy(alg window.Algorithm, limit int64) *policy.Policy {
	return &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: alg, Limit: limit, Window: int64(time.Second)}}}}
}

// roundTrip encodes checks as one entry and decodes it, requiring that
// it wrote want policies and that every check decodes under its own.
func roundTrip(t *testing.T, checks []Check, want int) {
	t.Helper()
	e, err := decodeAllow(EncodeAllow(nil, 1, checks)[1:])
	if err != nil {
		t.Fatal(err)
	}
	if len(e.policies) != want {
		t.Fatalf("%d policies written, want %d", len(e.policies), want)
	}
	for i, c := range e.checks {
		if got, want := e.policies[c.policy].Limits[0].Limit, checks[i].Policy.Limits[0].Limit; got != want {
			t.Fatalf("check %d decodes with limit %+v, want %+v", i, got, want)
		}
	}
}

// An entry writes each distinct policy once, whether its checks share a
// pointer or carry equal copies, and every check still points at its own.
func TestEntriesWriteEqualPoliciesOnce(t *testing.T) {
	a, b := limitPolicy(window.SlidingLog, 10), limitPolicy(window.SlidingLog, 11)
	roundTrip(t, []Check{
		{Key: "k0", Policy: a, Cost: 1}, {Key: "k1", Policy: limitPolicy(window.SlidingLog, 10), Cost: 1}, {Key: "k2", Policy: b, Cost: 1},
		{Key: "k3", Policy: a, Cost: 1}, {Key: "k4", Policy: limitPolicy(window.SlidingLog, 11), Cost: 1},
	}, 2)
	hits := []Hit{{Key: "k0", Policy: a, Cost: 1}, {Key: "k1", Policy: limitPolicy(window.SlidingLog, 10), Cost: 1}}
	h, err := decodeHits(EncodeHits(nil, 1, hits)[1:])
	if err != nil {
		t.Fatal(err)
	}
	if len(h.policies) != 1 || h.hits[0].policy != 0 || h.hits[1].policy != 0 {
		t.Errorf("hits: %d policies, indexes %d and %d; want one, shared", len(h.policies), h.hits[0].policy, h.hits[1].policy)
	}
}

// Past 127 distinct policies the count takes two bytes: the entry still
// decodes, every check under its own policy.
func TestEntriesWithManyPolicies(t *testing.T) {
	var checks []Check
	for round := 0; round < 2; round++ {
		for n := int64(1); n <= 200; n++ {
			checks = append(checks, Check{Key: "k", Policy: limitPolicy(window.FixedWindow, n), Cost: 1})
		}
	}
	roundTrip(t, checks, 200)
}
