package main

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/test/e2e"
)

// healthCall is the bare gRPC round trip every figure is compared with.
const healthCall = "grpc.health.v1.Health/Check"

// ghzClient names ghz in the table.
const ghzClient = "ghz → n1"

// benchGhz measures, with ghz against the first node of c, the health
// check and then every workload, adding a row for each. It returns the
// health result and the first workload's result (single strict Allow),
// for the 5-node comparison.
func benchGhz(ctx context.Context, rp *report, g *ghzRunner, c *e2e.Cluster, ws []workload, keys int,
	duration, warmup time.Duration, prof *profiler) (health, first *result, err error) {
	n1 := c.Nodes[0]
	done := prof.start("ghz-health")
	health, err = g.run(ctx, n1.GRPC, ghzRun{call: healthCall, data: "{}", decisions: 1}, duration, warmup)
	done()
	if err != nil {
		return nil, nil, err
	}
	rp.add(healthRow("gRPC health check (reference)", ghzClient, health))
	for i, w := range ws {
		run, err := w.ghz(keys, g.dir)
		if err != nil {
			return nil, nil, err
		}
		if err := w.checkOnce(ctx, n1.Limiter()); err != nil {
			rp.failed(w.name, ghzClient, w.judge(ghzClient, &result{}, health).target, fmt.Errorf("probe call: %w", err))
			continue
		}
		done := prof.start(fmt.Sprintf("ghz-%d", i))
		res, err := g.run(ctx, n1.GRPC, run, duration, warmup)
		done()
		if err != nil {
			rp.failed(w.name, ghzClient, w.judge(ghzClient, &result{}, health).target, err)
			continue
		}
		if i == 0 {
			first = res
		}
		rp.add(w.judge(ghzClient, res, health))
	}
	return health, first, nil
}
