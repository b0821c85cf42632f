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
// check and then every workload, in rounds, adding a row for each. It
// returns the median round of the first workload (single strict Allow),
// for the 5-node comparison, or nil when it could not be measured.
func benchGhz(ctx context.Context, rp *report, g *ghzRunner, c *e2e.Cluster, ws []workload, keys, rounds int,
	duration, warmup time.Duration, prof *profiler) (*sample, error) {
	n1 := c.Nodes[0]
	health := measurement{name: "gRPC health check", run: func(round int) (*result, error) {
		defer firstRound(prof, round, "ghz-health")()
		return g.run(ctx, n1.GRPC, ghzRun{call: healthCall, data: "{}", decisions: 1}, duration, warmup)
	}}
	loads := make([]measurement, len(ws))
	for i, w := range ws {
		var run ghzRun
		loads[i] = measurement{name: w.name, run: func(round int) (*result, error) {
			if round == 0 {
				var err error
				if run, err = w.ghz(keys, g.dir); err != nil {
					return nil, err
				}
				if err := w.checkOnce(ctx, n1.Limiter()); err != nil {
					return nil, fmt.Errorf("probe call: %w", err)
				}
			}
			defer firstRound(prof, round, fmt.Sprintf("ghz-%d", i))()
			return g.run(ctx, n1.GRPC, run, duration, warmup)
		}}
	}
	healths, samples, errs, err := inRounds(rp.out, rounds, health, loads)
	if err != nil {
		return nil, err
	}
	_, hr := medianHealth("gRPC health check (reference)", ghzClient, healths)
	rp.add(hr)
	var first *sample
	for i, w := range ws {
		if errs[i] != nil {
			rp.failed(w.name, ghzClient, w.judge(ghzClient, &result{}, healths[0]).target, errs[i])
			continue
		}
		r, mid := w.judgeRounds(ghzClient, samples[i])
		if i == 0 {
			first = &mid
		}
		rp.add(r)
	}
	return first, nil
}
