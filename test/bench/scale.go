package main

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/test/e2e"
)

// measureScale starts a cluster of nodes processes and measures, with ghz
// against its first node, the health check and w (single strict Allow).
// Its rate is compared with the 3-node one after normalising each by its
// own cluster's health rate, so that the comparison is of what floodgate
// costs, not of how busy the machine was.
func measureScale(ctx context.Context, rp *report, g *ghzRunner, bin e2e.Binaries, dir string, nodes int, args []string,
	w workload, keys int, duration, warmup time.Duration, health3, strict3 *result) error {
	c, err := startCluster(ctx, bin, dir, nodes, args)
	if err != nil {
		return err
	}
	defer c.Close()
	client := fmt.Sprintf("ghz → n1 of %d", nodes)
	health, err := g.run(ctx, c.Nodes[0].GRPC, ghzRun{call: healthCall, data: "{}", decisions: 1}, duration, warmup)
	if err != nil {
		return err
	}
	rp.add(healthRow(fmt.Sprintf("gRPC health check, %d nodes (reference)", nodes), client, health))
	run, err := w.ghz(keys, g.dir)
	if err != nil {
		return err
	}
	res, err := g.run(ctx, c.Nodes[0].GRPC, run, duration, warmup)
	if err != nil {
		return err
	}
	r := rateRow(fmt.Sprintf("%s, %d nodes", w.name, nodes), client, res, health, 0)
	norm3 := ratio(strict3.callsPerSec(), health3.callsPerSec())
	norm := ratio(res.callsPerSec(), health.callsPerSec())
	scale := ratio(norm, norm3)
	r.figure = fmt.Sprintf("%.2f× health = %.2f× the 3-node rate (%.2f× raw)", norm, scale,
		ratio(res.callsPerSec(), strict3.callsPerSec()))
	r.target = fmt.Sprintf("≥ %.1f× 3-node", targetScale)
	r.verdict = judge(scale >= targetScale && res.errorShare() <= maxErrorShare)
	rp.add(r)
	return nil
}
