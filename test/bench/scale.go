package main

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/test/e2e"
)

// measureScale starts a cluster of nodes processes and measures, with ghz
// against its first node, the health check and w (single strict Allow), in
// rounds. Its rate is compared with the 3-node one (strict3: the median
// round of the 3-node cluster) after normalising each by the health rate
// of its own round and cluster, so that the comparison is of what
// floodgate costs, not of how busy the machine was.
func measureScale(ctx context.Context, rp *report, g *ghzRunner, bin e2e.Binaries, dir string, nodes int, args []string,
	w workload, keys, rounds int, duration, warmup time.Duration, strict3 sample) error {
	c, err := startCluster(ctx, bin, dir, nodes, args)
	if err != nil {
		return err
	}
	defer c.Close()
	client := fmt.Sprintf("ghz → n1 of %d", nodes)
	run, err := w.ghz(keys, g.dir)
	if err != nil {
		return err
	}
	health := measurement{name: fmt.Sprintf("gRPC health check, %d nodes", nodes), run: func(int) (*result, error) {
		return g.run(ctx, c.Nodes[0].GRPC, ghzRun{call: healthCall, data: "{}", decisions: 1}, duration, warmup)
	}}
	load := measurement{name: fmt.Sprintf("%s, %d nodes", w.name, nodes), run: func(int) (*result, error) {
		return g.run(ctx, c.Nodes[0].GRPC, run, duration, warmup)
	}}
	healths, samples, errs, err := inRounds(rp.out, rounds, health, []measurement{load})
	if err != nil {
		return err
	}
	if errs[0] != nil {
		return errs[0]
	}
	_, hr := medianHealth(health.name+" (reference)", client, healths)
	rp.add(hr)
	mid, lo, hi := median(samples[0], w.key)
	r := rateRow(load.name, client, mid.res, mid.health, 0)
	norm3 := w.key(strict3)
	scale := ratio(w.key(mid), norm3)
	r.figure = fmt.Sprintf("%.2f× health = %.2f× the 3-node rate (%.2f× raw)", w.key(mid), scale,
		ratio(mid.res.callsPerSec(), strict3.res.callsPerSec()))
	if len(samples[0]) > 1 {
		r.figure += fmt.Sprintf("; %d rounds %.2f–%.2f× the 3-node rate", len(samples[0]), ratio(lo, norm3), ratio(hi, norm3))
	}
	r.target = fmt.Sprintf("≥ %.1f× 3-node", targetScale)
	r.verdict = judge(scale >= targetScale && mid.res.errorShare() <= maxErrorShare)
	rp.add(r)
	return nil
}
