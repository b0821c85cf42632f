package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/fsm"
	"github.com/floodgate/floodgate/policy"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/window"
)

// A node whose --max-log-length cannot hold a stored policy's sliding log
// is refused as a member, naming its flag and the policy; one of an older
// release (no cap told) and one that holds every policy pass.
func TestCheckLogCap(t *testing.T) {
	logOf := func(limit int64) *policy.Policy {
		return &policy.Policy{Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: limit, Window: int64(window.MaxWindow / 2)}}}}
	}
	big, small := logOf(20_000), logOf(100)
	big.Name, small.Name = "big", "small"
	v := &fsm.MetaView{Policies: map[string]*policy.Policy{"big": big, "small": small}}
	for _, tc := range []struct {
		cap  int64
		want string // "" passes
	}{
		{0, ""},
		{50_000, ""},
		{20_000, ""},
		{10_000, "max_log_length: node n2's --max-log-length 10000 cannot hold policy big"},
	} {
		err := checkLogCap(v, &metav1.Node{Id: "n2", MaxLogLength: tc.cap})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("cap %d: %v", tc.cap, err)
		case tc.want != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("cap %d: %v, want ErrConfig naming %q", tc.cap, err, tc.want)
		}
	}
}

// The meta leader checks every member record and policy write against the
// caps itself, whatever node took the request: a record may not lower its
// node's cap below a stored policy (a restart with a smaller flag, say),
// nor may a policy exceed the least cap; a record that keeps its cap
// passes, so a member that an older release let fall short still updates
// its addresses.
func TestLeaderChecksCaps(t *testing.T) {
	n := startOneWith(t, func(c *Config) { c.MaxLogLength = 50_000 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	logOf := func(name string, limit int64) *policy.Policy {
		return &policy.Policy{Name: name, Limits: []policy.Limit{{Limit: window.Limit{Algorithm: window.SlidingLog, Limit: limit, Window: int64(time.Minute)}}}}
	}
	if err := n.SetPolicies(ctx, []*policy.Policy{logOf("big", 40_000)}); err != nil {
		t.Fatal(err)
	}
	upsert := func(id string, maxLog int64) error {
		return n.applyMeta(ctx, fsm.MetaUpsertNode, &metav1.UpsertNode{Node: &metav1.Node{Id: id, GrpcAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2",
			GossipAddr: "127.0.0.1:3", MaxLogLength: maxLog}})
	}
	if err := upsert("n2", 45_000); err != nil {
		t.Fatalf("a member that holds big: %v", err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string // "" passes
	}{
		{"a new member too small", upsert("n3", 10_000), "node n3's --max-log-length 10000 cannot hold policy big"},
		{"a member lowering its cap", upsert("n2", 30_000), "node n2's --max-log-length 30000 cannot hold policy big"},
		{"a policy past the least cap", n.SetPolicies(ctx, []*policy.Policy{logOf("bigger", 48_000)}), "capped at 45000"},
		{"a member keeping its cap", upsert("n2", 45_000), ""},
		{"a policy within the least cap", n.SetPolicies(ctx, []*policy.Policy{logOf("fits", 45_000)}), ""},
	} {
		switch {
		case tc.want == "" && tc.err != nil:
			t.Errorf("%s: %v", tc.name, tc.err)
		case tc.want != "" && (!errors.Is(tc.err, ErrConfig) || !strings.Contains(fmt.Sprint(tc.err), tc.want)):
			t.Errorf("%s: %v, want ErrConfig naming %q", tc.name, tc.err, tc.want)
		}
	}
	if got := n.View().Node("n2").GetMaxLogLength(); got != 45_000 {
		t.Errorf("n2's record tells %d after its refused lowering, want 45000", got)
	}
	if got := n.MaxLogLength(); got != 45_000 {
		t.Errorf("the cluster's cap: %d, want 45000", got)
	}
}
