package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/test/e2e"
)

// startCluster starts n real floodgate processes through the e2e harness
// in a fresh directory under dir, with the daemon's default flags plus
// args, and waits until every shard is settled.
func startCluster(ctx context.Context, bin e2e.Binaries, dir string, n int, args []string) (*e2e.Cluster, error) {
	sub := filepath.Join(dir, fmt.Sprintf("cluster%d", n))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return nil, err
	}
	t0 := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := e2e.StartCluster(cctx, bin, sub, n, args...)
	if err != nil {
		return nil, fmt.Errorf("start %d-node cluster: %w", n, err)
	}
	fmt.Printf("%d-node cluster up and settled in %s (logs in %s)\n", n, time.Since(t0).Round(100*time.Millisecond), sub)
	return c, nil
}

// addrs lists the nodes' gRPC addresses.
func addrs(c *e2e.Cluster) []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.GRPC)
	}
	return out
}

// setPolicies stores policies through the Admin API of the first node and
// waits until every node answers a check against each of them.
func setPolicies(ctx context.Context, c *e2e.Cluster, policies []*pb.Policy) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.Nodes[0].Admin().SetPolicies(cctx, &pb.SetPoliciesRequest{Policies: policies}); err != nil {
		return fmt.Errorf("SetPolicies: %w", err)
	}
	for _, n := range c.Nodes {
		for _, p := range policies {
			for {
				actx, acancel := context.WithTimeout(cctx, 5*time.Second)
				_, err := n.Limiter().Allow(actx, &pb.AllowRequest{Key: "bench:policy-probe", Policy: p.Name})
				acancel()
				if err == nil {
					break
				}
				select {
				case <-cctx.Done():
					return fmt.Errorf("%s does not know policy %s: %v", n.ID, p.Name, err)
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}
	return nil
}

// benchPolicies are the policies the bench uses: the fast policy of the
// main workloads and, when perAlgorithm, one strict and one fast policy
// per algorithm.
func benchPolicies(perAlgorithm bool) []*pb.Policy {
	ps := []*pb.Policy{{Name: fastPolicy, Consistency: pb.Consistency_CONSISTENCY_FAST,
		Limits: []*pb.PolicyLimit{{Limit: slidingLog}}}}
	if perAlgorithm {
		for _, l := range algorithmLimits {
			for _, mode := range []pb.Consistency{pb.Consistency_CONSISTENCY_STRICT, pb.Consistency_CONSISTENCY_FAST} {
				ps = append(ps, &pb.Policy{Name: policyName(l, mode), Consistency: mode,
					Limits: []*pb.PolicyLimit{{Limit: l}}})
			}
		}
	}
	return ps
}
