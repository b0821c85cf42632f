package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/cluster/hashing"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/inproc"
)

func TestPoliciesSurviveFullRestart(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	ctx := context.Background()
	want := &pb.Policy{Name: "api", Mode: pb.Mode_MODE_SOFT, SoftPercent: 10, KeyBy: []string{"user"},
		Limits: []*pb.PolicyLimit{
			{Name: "minute", Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 60_000}},
			{Name: "hour", Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_COUNTER, Limit: 500, WindowMs: 3_600_000, Buckets: 60}},
		}}
	if _, err := nodes[0].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{want}}); err != nil {
		t.Fatal(err)
	}
	inproc.RestartAll(t, nodes...)
	for _, n := range nodes {
		inproc.Eventually(t, 10*time.Second, "policy on "+n.ID, func() error {
			got, err := n.Admin().GetPolicy(ctx, &pb.GetPolicyRequest{Name: "api"})
			if err == nil && !proto.Equal(got, want) {
				t.Fatalf("%s after restart:\n got %v\nwant %v", n.ID, got, want)
			}
			return err
		})
	}
}

// Fast checks are decided by the shard leader alone, so concurrent clients
// on every node still get exactly the limit; and their counts reach the
// followers, so after the leader goes the new one keeps denying.
func TestFastModeIsExactOnOneLeaderAndReplicates(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	ctx := context.Background()
	_, err := nodes[0].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{{
		Name: "fast", Consistency: pb.Consistency_CONSISTENCY_FAST,
		Limits: []*pb.PolicyLimit{{Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 20, WindowMs: 3_600_000}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		inproc.Eventually(t, 5*time.Second, "policy known on "+n.ID, func() error {
			_, err := n.Admin().GetPolicy(ctx, &pb.GetPolicyRequest{Name: "fast"})
			return err
		})
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				resp, err := nodes[i%3].Limiter().Allow(ctx, &pb.AllowRequest{Policy: "fast", Key: "hot"})
				if err != nil {
					t.Error(err)
					return
				}
				if resp.Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != 20 {
		t.Fatalf("fast mode admitted %d of 90, want exactly 20", allowed.Load())
	}
	// Stop the shard's leader once its batches have had time to commit.
	time.Sleep(200 * time.Millisecond)
	st, err := nodes[0].Admin().Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	leader := st.ShardStatus[hashing.ShardOf("hot", int(st.Shards))].Leader
	var rest []*inproc.Node
	for _, n := range nodes {
		if n.ID == leader {
			n.Stop()
		} else {
			rest = append(rest, n)
		}
	}
	inproc.Eventually(t, 10*time.Second, "new leader denies", func() error {
		resp, err := rest[0].Limiter().Allow(ctx, &pb.AllowRequest{Policy: "fast", Key: "hot"})
		if err != nil {
			return err
		}
		if resp.Allowed {
			t.Fatalf("the new leader admitted past the limit: the fast counts were not replicated")
		}
		return nil
	})
}

// An elastic policy stretches its limits to the ceiling while the policy's
// cluster-wide admitted rate is under its capacity; once traffic pushes the
// rate over, keys get only their base limit. The capacity sits between one
// node's share of the traffic and the cluster's total, so only rates
// gossiped between nodes can tell there is no room.
func TestElasticFollowsClusterRate(t *testing.T) {
	nodes := inproc.Cluster(t, 3)
	ctx := context.Background()
	elastic := func(name string, capacity int64) *pb.Policy {
		return &pb.Policy{Name: name, Mode: pb.Mode_MODE_ELASTIC, Elastic: &pb.Elastic{CeilingPercent: 200, Capacity: capacity},
			// A sliding log: a fixed window ends at the next epoch-aligned
			// hour, and one passing during a key's 30 checks admitted more.
			Limits: []*pb.PolicyLimit{{Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 10, WindowMs: 3_600_000}}}}
	}
	if _, err := nodes[0].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{
		elastic("roomy", 1_000_000), elastic("tight", 60),
	}}); err != nil {
		t.Fatal(err)
	}
	admitted := func(policy, key string, n int) int {
		got := 0
		for i := 0; i < n; i++ {
			resp, err := nodes[i%3].Limiter().Allow(ctx, &pb.AllowRequest{Policy: policy, Key: key})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Allowed {
				got++
			}
		}
		return got
	}
	inproc.Eventually(t, 5*time.Second, "policies known", func() error {
		_, err := nodes[2].Admin().GetPolicy(ctx, &pb.GetPolicyRequest{Name: "tight"})
		return err
	})
	if got := admitted("roomy", "a", 30); got != 20 {
		t.Fatalf("with room: %d admitted, want the ceiling 20", got)
	}
	if got := admitted("tight", "first", 30); got != 20 {
		t.Fatalf("before any traffic: %d admitted, want the ceiling 20", got)
	}
	// 60 keys × 10 admitted at once, spread over every shard: about 120
	// per second across the cluster over the 5 s the rate looks back, 40
	// per node.
	var wg sync.WaitGroup
	for k := 0; k < 60; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			admitted("tight", fmt.Sprintf("load-%d", k), 10)
		}()
	}
	wg.Wait()
	time.Sleep(1500 * time.Millisecond) // every node hears every node's rate
	if got := admitted("tight", "late", 30); got != 10 {
		t.Fatalf("over capacity: %d admitted, want the base 10", got)
	}
}
