package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate/floodgate/rpc/client"
	"github.com/floodgate/floodgate/test/e2e"
)

// sdkClient names the Go SDK in the table.
const sdkClient = "Go SDK"

// benchSDK measures every workload through the Go SDK (which sends each
// check to its shard's leader), from clients goroutines in this process,
// against a bare health-check loop spread over all the nodes the same way.
// It returns the health result.
func benchSDK(rp *report, c *e2e.Cluster, cl *client.Client, ws []workload, keys, clients int,
	duration, warmup time.Duration, prof *profiler) *result {
	done := prof.start("sdk-health")
	health := measure(clients, duration, warmup, func(i int, _ *rand.Rand) (int, error) {
		n := c.Nodes[i%len(c.Nodes)]
		_, err := healthpb.NewHealthClient(n.Conn()).Check(context.Background(), &healthpb.HealthCheckRequest{})
		return 1, err
	})
	done()
	rp.add(healthRow("gRPC health check, over all nodes (reference)", sdkClient, health))
	for i, w := range ws {
		done := prof.start(fmt.Sprintf("sdk-%d", i))
		res := w.measureSDK(cl, keys, clients, duration, warmup)
		done()
		rp.add(w.judge(sdkClient, res, health))
	}
	return health
}
