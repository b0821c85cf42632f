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
// check to its shard's leader, and by default lets concurrent single
// checks bound for one node share a call), from clients goroutines in this
// process, against a bare health-check loop spread over all the nodes the
// same way, in rounds. The single strict and fast checks are measured
// again through alone, a client with NoCoalescing, for comparison. It
// returns the median health result.
func benchSDK(rp *report, c *e2e.Cluster, cl, alone *client.Client, ws []workload, keys, clients, rounds int,
	duration, warmup time.Duration, prof *profiler) *result {
	health := measurement{name: "gRPC health check", run: func(round int) (*result, error) {
		defer firstRound(prof, round, "sdk-health")()
		return measure(clients, duration, warmup, func(i int, _ *rand.Rand) (int, error) {
			n := c.Nodes[i%len(c.Nodes)]
			_, err := healthpb.NewHealthClient(n.Conn()).Check(context.Background(), &healthpb.HealthCheckRequest{})
			return 1, err
		}), nil
	}}
	via := make([]*client.Client, len(ws)) // the client of each workload
	for i := range ws {
		via[i] = cl
	}
	for _, w := range ws {
		if w.batch == 0 && w.rps == 0 && (w.kind == strict && w.limit == slidingLog || w.kind == fast) {
			w.name += ", each check its own call (NoCoalescing)"
			w.kind = info
			ws = append(ws, w)
			via = append(via, alone)
		}
	}
	loads := make([]measurement, len(ws))
	for i, w := range ws {
		loads[i] = measurement{name: w.name, run: func(round int) (*result, error) {
			defer firstRound(prof, round, fmt.Sprintf("sdk-%d", i))()
			return w.measureSDK(via[i], keys, clients, duration, warmup), nil
		}}
	}
	// The Go loops count failed calls in their results: no error here.
	healths, samples, _, _ := inRounds(rp.out, rounds, health, loads)
	mid, hr := medianHealth("gRPC health check, over all nodes (reference)", sdkClient, healths)
	rp.add(hr)
	for i, w := range ws {
		r, _ := w.judgeRounds(sdkClient, samples[i])
		rp.add(r)
	}
	return mid
}
