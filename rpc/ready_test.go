package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/cluster"
	"github.com/floodgate/floodgate/metrics"
	"github.com/floodgate/floodgate/policy"
	peerv1 "github.com/floodgate/floodgate/proto/floodgate/peer/v1"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
	"github.com/floodgate/floodgate/window"
)

// A node serves its gRPC port before it knows its cluster (its groups and
// peers need it), but answers no check until it is ready: before, a
// restarting node hashed keys with a shard count of 0, sent every key to
// shard 0 and counted it there, and called named policies unknown
// (InvalidArgument, which clients take as final).
func TestChecksWaitUntilTheNodeIsReady(t *testing.T) {
	cfg := inproc.Config(t, "n1")
	node, _, conn := openedNode(t, cfg)
	ctx := context.Background()
	rl := pb.NewRateLimiterClient(conn)
	inline := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 60_000}

	// Not started: no shard count, no policies. Each refused check counts
	// as a failed one: a node (or a cluster) stuck starting fails them all.
	refused := metrics.CheckErrors.WithLabelValues(codes.Unavailable.String())
	before := value(t, refused)
	for name, call := range map[string]func() error{
		"inline": func() error { _, err := rl.Allow(ctx, &pb.AllowRequest{Key: "k", Limit: inline}); return err },
		"policy": func() error { _, err := rl.Allow(ctx, &pb.AllowRequest{Key: "k", Policy: "api"}); return err },
		"batch": func() error {
			_, err := rl.AllowBatch(ctx, &pb.AllowBatchRequest{Requests: []*pb.AllowRequest{{Key: "k", Limit: inline}}})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "starting") {
			t.Errorf("%s before start: %v, want Unavailable (starting)", name, err)
		}
	}
	if got := value(t, refused) - before; got != 3 {
		t.Errorf("floodgate_check_errors_total{code=\"Unavailable\"} rose by %v for 3 checks refused while starting, want 3", got)
	}
	// A peer's forward is refused as not-leader: nothing counted, retryable.
	pol := policy.Policy{Limits: []policy.Limit{{Limit: inlineLimit()}}}
	resp, err := peerv1.NewPeerClient(conn).Forward(ctx, &peerv1.ForwardRequest{Checks: []*peerv1.ForwardCheck{
		{Shard: 0, Key: "k", Policy: pol.AppendBinary(nil), Cost: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Results[0]; r.Code != peerv1.ForwardResult_NOT_LEADER {
		t.Errorf("forward before start: %v %q, want NOT_LEADER", r.Code, r.Message)
	}

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := node.Start(sctx); err != nil {
		t.Fatal(err)
	}
	inproc.Eventually(t, 10*time.Second, "checks served once ready", func() error {
		_, err := rl.Allow(ctx, &pb.AllowRequest{Key: "k", Limit: inline})
		return err
	})
}

// CheckOwner refuses a shard that does not own the key, or does not exist.
func TestCheckOwner(t *testing.T) {
	n := inproc.Cluster(t, 1)[0].Node
	shards := n.Shards()
	key := "user:42"
	own, err := n.ShardOf(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.CheckOwner(own, key); err != nil {
		t.Errorf("own shard refused: %v", err)
	}
	for _, s := range []int{(own + 1) % shards, -1, shards, 1 << 20} {
		if err := n.CheckOwner(s, key); err == nil || !strings.Contains(err.Error(), "shard") {
			t.Errorf("shard %d accepted for a key of shard %d (err %v)", s, own, err)
		}
	}
}

func inlineLimit() window.Limit {
	return window.Limit{Algorithm: window.SlidingLog, Limit: 10, Window: int64(time.Minute)}
}

// Right after a restart, a node (leading the meta group or not) never
// calls a stored policy unknown: it catches up with the meta leader's
// whole log first. Before, a meta leader just elected compared against its
// own applied index and answered InvalidArgument "unknown policy".
func TestRestartedNodeKnowsItsPolicies(t *testing.T) {
	nodes := inproc.Cluster(t, 1)
	ctx := context.Background()
	pol := &pb.Policy{Name: "api", Limits: []*pb.PolicyLimit{{Limit: &pb.Limit{
		Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 100, WindowMs: 60_000}}}}
	if _, err := nodes[0].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{pol}}); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		inproc.RestartAll(t, nodes...)
		for i := range 50 {
			_, err := nodes[0].Limiter().Allow(ctx, &pb.AllowRequest{Key: "k", Policy: "api"})
			if status.Code(err) == codes.InvalidArgument {
				t.Fatalf("restart %d, call %d: %v", round, i, err)
			}
		}
	}
}

// A policy set through one node is known at once on every other: the
// reader waits until its meta state has seen the meta leader's latest
// command. Raft's applied index is not enough: it moves when an entry is
// handed to the state machine, before the state shows it, and a reader
// waiting on it answered "unknown policy" now and then.
func TestPolicySetAnywhereIsKnownEverywhereAtOnce(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	ctx := context.Background()
	for i := range 20 {
		name := fmt.Sprintf("p%d", i)
		pol := &pb.Policy{Name: name, Limits: []*pb.PolicyLimit{{Limit: &pb.Limit{
			Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 60_000}}}}
		if _, err := nodes[i%3].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{pol}}); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if _, err := n.Limiter().Allow(ctx, &pb.AllowRequest{Key: "k", Policy: name}); err != nil {
				t.Fatalf("policy %s just set through %s, checked on %s: %v", name, nodes[i%3].ID, n.ID, err)
			}
		}
	}
}

// A forwarded check naming a group this node does not know is refused as
// a bad request only after the node caught up with the meta leader: the
// group may be newer than this node's meta state (it just restarted).
// One that still does not exist then is the sender's error.
func TestCheckOwnerFreshInSlots(t *testing.T) {
	n := inproc.SlotCluster(t, 1, 64)[0].Node
	ctx := context.Background()
	key := "user:42"
	own, err := n.ShardOf(key)
	if err != nil {
		t.Fatal(err)
	}
	caughtUp := false
	if err := n.CheckOwnerFresh(ctx, own, key, &caughtUp); err != nil || caughtUp {
		t.Errorf("own group refused (%v) or caught up for nothing (%v)", err, caughtUp)
	}
	for _, g := range []int{-1, 1 << 20} {
		if err := n.CheckOwnerFresh(ctx, g, key, &caughtUp); !errors.Is(err, cluster.ErrWrongShard) {
			t.Errorf("group %d: %v, want ErrWrongShard once caught up", g, err)
		}
		if !caughtUp {
			t.Errorf("group %d: refused without catching up", g)
		}
	}
}
