package rpc

import (
	"errors"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
)

// A forwarded atomic set is of one shard and one policy, and is refused
// whole when any of its checks is invalid: a peer is validated like a
// client, and half a set must never be counted.
func TestForwardSets(t *testing.T) {
	p, q := &policy.Policy{Name: "p"}, &policy.Policy{Name: "q"}
	bad := errors.New("checks[1].cost: too much")
	for _, tc := range []struct {
		name   string
		in     []*peerv1.ForwardCheck
		checks []fsm.Check
		errs   []error
		want   []string // "" for no error, else a part of the error
	}{
		{"singles and a set", []*peerv1.ForwardCheck{{Shard: 1}, {Shard: 2}, {Shard: 2, Joined: true}},
			[]fsm.Check{{Policy: p}, {Policy: q}, {Policy: q}}, make([]error, 3), []string{"", "", ""}},
		{"joined first", []*peerv1.ForwardCheck{{Shard: 1, Joined: true}, {Shard: 1}},
			[]fsm.Check{{Policy: p}, {Policy: p}}, make([]error, 2), []string{"checks[0].joined: no check before it", ""}},
		{"two shards", []*peerv1.ForwardCheck{{Shard: 1}, {Shard: 2, Joined: true}, {Shard: 3}},
			[]fsm.Check{{Policy: p}, {Policy: p}, {Policy: p}}, make([]error, 3),
			[]string{"checks[1].shard: 2, its set's (checks[0]) is 1", "checks[0..1], one atomic set", ""}},
		{"two policies", []*peerv1.ForwardCheck{{Shard: 1}, {Shard: 1, Joined: true}},
			[]fsm.Check{{Policy: p}, {Policy: q}}, make([]error, 2),
			[]string{"checks[1].policy: not its set's", "checks[1].policy: not its set's"}},
		{"one invalid check refuses its set", []*peerv1.ForwardCheck{{Shard: 1}, {Shard: 1, Joined: true}, {Shard: 1}},
			[]fsm.Check{{Policy: p}, {Policy: p}, {Policy: p}}, []error{nil, bad, nil},
			[]string{"checks[0..1], one atomic set: checks[1].cost: too much", "checks[1].cost: too much", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forwardSets(tc.in, tc.checks, tc.errs)
			for i, want := range tc.want {
				switch {
				case want == "" && tc.errs[i] != nil:
					t.Errorf("checks[%d]: %v, want no error", i, tc.errs[i])
				case want != "" && (tc.errs[i] == nil || !strings.Contains(tc.errs[i].Error(), want)):
					t.Errorf("checks[%d]: %v, want %q", i, tc.errs[i], want)
				}
			}
		})
	}
}
