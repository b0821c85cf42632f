package cluster

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
)

// A gossiped rate message counts only from another member, and only for
// the meta state's elastic policies, each figure between 0 and the
// policy's capacity: unauthenticated gossip could otherwise invent nodes
// (memory, and figures summed), take the room away (a huge figure), or
// give it back under overload (a negative one, or a sum that wrapped).
func TestJudgeRates(t *testing.T) {
	v := &fsm.MetaView{
		Nodes: []*metav1.Node{{Id: "n1"}, {Id: "n2"}, {Id: "n3"}},
		Policies: map[string]*policy.Policy{
			"el":   {Name: "el", Mode: policy.Elastic, ElasticCapacity: 100},
			"hard": {Name: "hard", Mode: policy.Hard},
		},
	}
	msg := func(node string, rates map[string]int64) []byte {
		b, err := json.Marshal(rateMessage{Node: node, Rates: rates})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		ok   bool
		want map[string]int64
	}{
		{"a member's figure", msg("n2", map[string]int64{"el": 40}), true, map[string]int64{"el": 40}},
		{"above the capacity", msg("n2", map[string]int64{"el": 9e18}), true, map[string]int64{"el": 100}},
		{"negative", msg("n2", map[string]int64{"el": -9e18}), true, map[string]int64{}},
		{"unknown and not elastic", msg("n3", map[string]int64{"ghost": 5, "hard": 5}), true, map[string]int64{}},
		{"an invented node", msg("ghost0", map[string]int64{"el": 40}), false, nil},
		{"no node", msg("", map[string]int64{"el": 40}), false, nil},
		{"this node's own", msg("n1", map[string]int64{"el": 40}), false, nil},
		{"not JSON", []byte("\x08{"), false, nil},
	} {
		node, kept, ok := judgeRates(v, "n1", tc.b)
		if ok != tc.ok || (ok && !maps.Equal(kept, tc.want)) {
			t.Errorf("%s: %q %v %v, want %v %v", tc.name, node, kept, ok, tc.want, tc.ok)
		}
	}
}

// Figures a node stopped sending are forgotten when the next message
// arrives, not only when an elastic check asks for the sum.
func TestRatesForgetStaleFigures(t *testing.T) {
	r := newRates()
	now := time.Unix(1_000, 0)
	r.learn("n2", map[string]int64{"el": 100}, now)
	r.learn("n3", map[string]int64{"el": 100}, now.Add(rateStale/2))
	if got := r.cluster("el", now.Add(rateStale/2)); got != 200 {
		t.Fatalf("cluster rate %d, want 200", got)
	}
	r.learn("n3", map[string]int64{"el": 100}, now.Add(rateStale+time.Second))
	r.mu.Lock()
	_, kept := r.remote["n2"]
	r.mu.Unlock()
	if kept {
		t.Fatal("n2's figure, older than rateStale, kept")
	}
}
