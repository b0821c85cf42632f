package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A node started with another --gossip-key than the cluster's, or with
// none, is refused at its join, naming the flag, and exits: before, it was
// added as a member that gossip never heard, and listed dead until an
// operator removed it.
func TestJoinWithAnotherGossipKeyIsRefused(t *testing.T) {
	t.Parallel()
	const key = "RD/MfEpCdLGl7JZSd7VYXSVeS5CSpLnrU4Zox8XKsX8="
	c := startCluster(t, 2, "--gossip-key", key)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"another key", "gossip_key: node n-other's --gossip-key is not this cluster's", []string{"--gossip-key", "ZAbbpm4tbPqZdIOa6zsRmpZmiB5Yj9Ftx9TPLfVdNLs="}},
		{"no key", "gossip_key: this cluster encrypts its gossip, and node n-none has no --gossip-key", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "n-other"
			if tc.args == nil {
				id = "n-none"
			}
			n, err := NewNode(c.Bin, t.TempDir(), id, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(n.Close)
			if err := n.Start(c.Nodes[0].GRPC); err != nil {
				t.Fatal(err)
			}
			select {
			case <-n.Exited():
			case <-ctx.Done():
				t.Fatalf("still running with a wrong gossip key:\n%s", tail(n.Log(), 20))
			}
			if !strings.Contains(n.Log(), tc.want) {
				t.Fatalf("no error naming the flag (want %q):\n%s", tc.want, tail(n.Log(), 10))
			}
			st, err := c.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Nodes) != 2 {
				t.Fatalf("the refused node became a member: %v", st.Nodes)
			}
		})
	}
}
