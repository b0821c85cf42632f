package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/client"
)

// algorithmLimits are the limits of the per-algorithm runs: generous, so
// most checks are admitted and counted (the costly path).
var algorithmLimits = []*pb.Limit{
	{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 100, WindowMs: 1000},
	{Algorithm: pb.Algorithm_SLIDING_COUNTER, Limit: 1000, WindowMs: 60_000, Buckets: 60},
	{Algorithm: pb.Algorithm_SLIDING_COUNTER_WEIGHTED, Limit: 1000, WindowMs: 60_000, Buckets: 60},
	{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 1000, WindowMs: 60_000},
	{Algorithm: pb.Algorithm_TOKEN_BUCKET, Limit: 1000, WindowMs: 60_000, Burst: 100},
	{Algorithm: pb.Algorithm_GCRA, Limit: 1000, WindowMs: 1000, Burst: 10},
}

// policyName names the policy of limit l in consistency mode.
func policyName(l *pb.Limit, mode pb.Consistency) string {
	m := "strict"
	if mode == pb.Consistency_CONSISTENCY_FAST {
		m = "fast"
	}
	return m + "-" + strings.ToLower(l.Algorithm.String())
}

// compareAlgorithms measures single Allow calls through the SDK against a
// strict and a fast policy of every algorithm (the policies of
// benchPolicies(true)); the rows carry their ratio to health, no target.
func compareAlgorithms(rp *report, cl *client.Client, keys, clients int, duration, warmup time.Duration,
	health *result, prof func(string) func()) {
	for _, l := range algorithmLimits {
		for _, mode := range []pb.Consistency{pb.Consistency_CONSISTENCY_STRICT, pb.Consistency_CONSISTENCY_FAST} {
			name := policyName(l, mode)
			done := prof("sdk-" + name)
			r := measure(clients, duration, warmup, func(_ int, rr *rand.Rand) (int, error) {
				_, err := cl.Allow(context.Background(), &pb.AllowRequest{Key: fmt.Sprintf("alg:%d", rr.IntN(keys)), Policy: name})
				return 1, err
			})
			done()
			rp.add(rateRow("Allow, policy "+name, "Go SDK", r, health, 0))
		}
	}
}
