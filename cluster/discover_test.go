package cluster

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/test/dnstest"
)

// fleet answers Hello for the fresh nodes at its addresses and for
// members, and refuses AddNode, as nodes that wait to form one do and a
// cluster with no meta leader does.
type fleet struct {
	deadSeeds
	ids map[string]string // address → node id; "": nothing answers there; "member": a member of a cluster
}

func (f *fleet) Hello(_ context.Context, addr string) (string, string, error) {
	if id := f.ids[addr]; id == "member" {
		return id, "cluster-a", nil // AddNode refuses: ErrNotReady, a cluster with no meta leader yet
	} else if id != "" {
		return id, "", nil
	}
	return "", "", ErrNoLeader
}

func (f *fleet) AddNode(context.Context, string, *metav1.Node, GossipProof) (string, []string, error) {
	return "", nil, ErrNotReady
}

func expectingNode(t *testing.T, peers Peers, log *lockedBuffer, expect int, join ...string) *Node {
	t.Helper()
	n, err := Open(Config{
		NodeID: "n2", DataDir: t.TempDir(), GRPCAddr: loopback(t), RaftAddr: loopback(t), GossipAddr: loopback(t),
		Shards: 1, Replicas: 1, Join: join, BootstrapExpect: expect, Logger: slog.New(slog.NewTextHandler(log, nil)),
	}, peers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// Of the fresh nodes found, the smallest id creates the cluster once
// enough are found; the others wait for it.
func TestBootstrapExpect(t *testing.T) {
	const waiting, held = "waiting for the cluster to form", "not creating the cluster: some --join addresses"
	for _, tc := range []struct {
		name    string
		ids     map[string]string
		expect  int
		creates bool
		says    string // in the log of a node that does not create
	}{
		{"the smallest of three", map[string]string{"127.0.0.1:11": "n3", "127.0.0.1:12": "n4"}, 3, true, ""},
		{"not the smallest", map[string]string{"127.0.0.1:11": "n1", "127.0.0.1:12": "n3"}, 3, false, waiting},
		{"too few found", map[string]string{"127.0.0.1:11": "n3"}, 3, false, waiting},
		{"itself under another name does not count", map[string]string{"127.0.0.1:11": "n2", "127.0.0.1:12": "n3"}, 3, false, waiting},
		// A member down, or restarting, answers nothing: new nodes scaled
		// up meanwhile must not create a cluster beside it.
		{"an address did not answer", map[string]string{"127.0.0.1:11": "n3", "127.0.0.1:12": "n4", "127.0.0.1:13": ""}, 3, false, held},
		// A member answers but its cluster cannot take the node yet (no
		// meta leader after a restart): still a cluster.
		{"a member answered and could not take it", map[string]string{"127.0.0.1:11": "n3", "127.0.0.1:12": "n4", "127.0.0.1:13": "member"}, 3, false, held},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log lockedBuffer
			var join []string
			for a := range tc.ids {
				join = append(join, a)
			}
			n := expectingNode(t, &fleet{ids: tc.ids}, &log, tc.expect, join...)
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			err := n.Start(ctx)
			if created := err == nil && n.View().Initialized(); created != tc.creates {
				t.Fatalf("created %v (err %v), want %v\n%s", created, err, tc.creates, log.String())
			}
			if !tc.creates && !strings.Contains(log.String(), tc.says) {
				t.Fatalf("a node that does not create says not %q:\n%s", tc.says, log.String())
			}
		})
	}
}

// dns: join entries stand for every address the name resolves to, looked
// up at each attempt; this node's own address is left out.
func TestResolveJoin(t *testing.T) {
	dns, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	var log lockedBuffer
	n := expectingNode(t, &deadSeeds{err: ErrNoLeader}, &log, 0)
	n.cfg.Resolver = dns.Resolver()
	n.cfg.GRPCAddr = "127.0.0.2:7700"
	ctx := context.Background()
	got, err := n.resolveJoin(ctx, []string{"dns:floodgate-headless:7700", "10.0.0.9:7700"})
	if err == nil || !slices.Equal(got, []string{"10.0.0.9:7700"}) {
		t.Fatalf("before the name exists: %v, %v", got, err)
	}
	dns.Set("floodgate-headless", "127.0.0.3", "127.0.0.2", "127.0.0.1")
	got, err = n.resolveJoin(ctx, []string{"dns:floodgate-headless:7700"})
	if err != nil || !slices.Equal(got, []string{"127.0.0.1:7700", "127.0.0.3:7700"}) {
		t.Fatalf("got %v, %v; want the other two pods", got, err)
	}
}

func TestCheckJoinAddr(t *testing.T) {
	for addr, ok := range map[string]bool{
		"10.0.0.1:7700": true, "dns:floodgate-headless:7700": true, "dns:floodgate.ns.svc.cluster.local:7700": true,
		"dns:floodgate-headless": false, "dns:": false, "dns:bad/name:7700": false, "floodgate": false,
	} {
		if err := CheckJoinAddr("join", addr); (err == nil) != ok {
			t.Errorf("%q: %v, want ok=%v", addr, err, ok)
		}
	}
}
