package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/floodgate/floodgate/rpc/client"
	"github.com/floodgate/floodgate/test/e2e"
)

// benchClusters runs every phase that needs a cluster: on three nodes the
// idle cost, the ghz and SDK workloads and failover; then the larger
// cluster. A phase that fails is reported as a failed row and the others
// still run; only a cluster that does not start ends the run.
func benchClusters(ctx context.Context, rp *report, o options, args []string, dir string) error {
	ghzBin, err := ensureGhz(o.ghz)
	if err != nil {
		return err
	}
	g := &ghzRunner{bin: ghzBin, dir: dir, concurrency: o.clients, connections: o.ghzConns}
	ws := workloads(o.batch, o.heldRate)
	if o.runs("ceiling") {
		if err := benchCeiling(ctx, rp, g, ws[0], o.keys, o.rounds, o.duration, o.warmup); err != nil {
			rp.failed("Allow on a stub server that does nothing (the client's ceiling)", ghzClient+" stub", "", err)
		}
	}
	bin, err := e2e.Build(dir)
	if err != nil {
		return err
	}
	c, err := startCluster(ctx, bin, dir, 3, args)
	if err != nil {
		return err
	}
	atExit(c.Close)
	defer c.Close()

	if o.idle > 0 && o.runs("idle") {
		fmt.Printf("\nidle: %s quiet, then %s sampled\n", o.idleSettle, o.idle)
		time.Sleep(o.idleSettle)
		if res, err := measureIdle(c, o.idle); err != nil {
			rp.failed("idle 3-node cluster", "none", fmt.Sprintf("≤ %.0f%% of one core", targetIdle), err)
		} else {
			rp.add(res.row(3))
		}
	}

	if err := setPolicies(ctx, c, benchPolicies(o.perAlgorithm > 0)); err != nil {
		return err
	}
	var prof *profiler
	if o.profile != "" {
		prof = &profiler{httpAddr: c.Nodes[0].HTTP, dir: o.profile, warmup: o.warmup, duration: o.duration}
	}

	var strict3 *sample
	if o.runs("ghz") {
		fmt.Printf("\nghz against n1 (%s), %d callers, %d connection(s), %d rounds, %s per run after %s warmup\n",
			c.Nodes[0].GRPC, o.clients, o.ghzConns, o.rounds, o.duration, o.warmup)
		strict3, err = benchGhz(ctx, rp, g, c, ws, o.keys, o.rounds, o.duration, o.warmup, prof)
		if err != nil {
			rp.failed("gRPC health check (reference)", ghzClient, "", err)
		}
	}

	cl, err := client.New(ctx, client.Options{Addrs: addrs(c)})
	if err != nil {
		return fmt.Errorf("SDK client: %w", err)
	}
	alone, err := client.New(ctx, client.Options{Addrs: addrs(c), NoCoalescing: true})
	if err != nil {
		cl.Close()
		return fmt.Errorf("SDK client: %w", err)
	}
	closeClient := sync.OnceFunc(func() { cl.Close(); alone.Close() }) // Close may be called once
	defer closeClient()
	var sdkHealth *result
	if o.runs("sdk") {
		fmt.Printf("\nGo SDK to every node, %d callers, %d rounds\n", o.clients, o.rounds)
		sdkHealth = benchSDK(rp, c, cl, alone, ws, o.keys, o.clients, o.rounds, o.duration, o.warmup, prof)
	}
	if o.perAlgorithm > 0 && sdkHealth != nil && o.runs("algorithms") {
		fmt.Printf("\nsingle Allow per algorithm and consistency through the SDK, %s each\n", o.perAlgorithm)
		compareAlgorithms(rp, cl, o.keys, o.clients, o.perAlgorithm, o.warmup, sdkHealth, prof.start)
	}

	if o.failover.reps > 0 && o.runs("failover") {
		fmt.Printf("\nfailover: %d kills, %d probe keys per client, one check per key every %s\n",
			o.failover.reps, o.failover.keys, o.failover.interval)
		if res, err := measureFailover(ctx, c, cl, o.failover); err != nil {
			rp.failed("leader failover", "", "≤ "+fmtDur(targetFailover), err)
		} else {
			for _, r := range res.rows(len(c.Nodes)) {
				rp.add(r)
			}
		}
	}
	closeClient()
	c.Close()

	if o.scaleNodes > 0 && o.runs("scale") {
		fmt.Printf("\n%d-node cluster, ghz against n1\n", o.scaleNodes)
		target := fmt.Sprintf("≥ %.1f× 3-node", targetScale)
		switch {
		case strict3 == nil:
			rp.failed(fmt.Sprintf("%s, %d nodes", ws[0].name, o.scaleNodes), ghzClient, target,
				fmt.Errorf("no 3-node figure to compare with"))
		default:
			if err := measureScale(ctx, rp, g, bin, dir, o.scaleNodes, args, ws[0], o.keys, o.rounds, o.duration, o.warmup,
				*strict3); err != nil {
				rp.failed(fmt.Sprintf("%s, %d nodes", ws[0].name, o.scaleNodes), ghzClient, target, err)
			}
		}
	}
	return nil
}

// header describes the run: machine, build, flags.
func header(o options, args []string) []string {
	load, _ := os.ReadFile("/proc/loadavg")
	commit := gitHead()
	flags := "defaults"
	if len(args) > 0 {
		flags = strings.Join(args, " ")
	}
	return []string{
		fmt.Sprintf("floodgate `make bench`, %s, commit %s, %s, %d CPUs, load average %s at the start",
			time.Now().Format("2006-01-02 15:04"), commit, runtime.Version(), runtime.NumCPU(),
			strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " ")),
		fmt.Sprintf("nodes: real bin/floodgate processes on loopback, node flags: %s; %d callers, %d random keys, %s per measurement after %s warmup, %d rounds",
			flags, o.clients, o.keys, o.duration, o.warmup, o.rounds),
		"ratios are to the bare gRPC health check of the same client and round; each row is the round with the median figure, then every round's spread; absolute figures move with the machine's load",
	}
}

// gitHead is the short id of the checked-out commit ("unknown" without
// git), marked "+changes" when tracked files differ from it.
func gitHead() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	id := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		id += "+changes"
	}
	return id
}
