// Command bench starts a three-node floodgate cluster on this machine and
// measures, in one run: single Allow calls from concurrent clients, batch
// calls of 100 checks, and a bare gRPC health-check loop as the reference
// for what one gRPC round trip costs here. `make bench` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/client"
	"github.com/floodgate/floodgate/test/e2e"
)

func main() {
	var (
		clients  = flag.Int("clients", 64, "concurrent clients")
		duration = flag.Duration("duration", 10*time.Second, "length of each measurement")
		warmup   = flag.Duration("warmup", 2*time.Second, "unmeasured load before each measurement")
		batch    = flag.Int("batch", 100, "checks per batch call")
		keys     = flag.Int("keys", 100_000, "distinct keys the load spreads over")
		shards   = flag.Int("shards", 64, "shards of the benchmark cluster")
		nodeArgs = flag.String("node-args", "", "extra flags for every node, space-separated")
		profile  = flag.String("profile", "", "save node n1's CPU profile of each workload into this directory")
		perAlg   = flag.Duration("per-algorithm", 5*time.Second, "length of each per-algorithm strict/fast run (0 skips them)")
	)
	flag.Parse()
	if *profile != "" {
		*nodeArgs += " --pprof"
	}
	if err := run(*clients, *duration, *warmup, *batch, *keys, *shards, strings.Fields(*nodeArgs), *profile, *perAlg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(clients int, duration, warmup time.Duration, batch, keys, shards int, nodeArgs []string, profileDir string, perAlgorithm time.Duration) error {
	dir, err := os.MkdirTemp("", "floodgate-bench")
	if err != nil {
		return err
	}
	if os.Getenv("BENCH_KEEP") == "" {
		defer os.RemoveAll(dir)
	} else {
		fmt.Println("keeping", dir)
	}
	bin, err := e2e.Build(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := e2e.StartCluster(ctx, bin, dir, 3, append([]string{"--shards", fmt.Sprint(shards)}, nodeArgs...)...)
	if err != nil {
		return err
	}
	defer c.Close()
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.GRPC)
	}
	cl, err := client.New(ctx, client.Options{Addrs: addrs})
	if err != nil {
		return err
	}
	defer cl.Close()
	fmt.Printf("floodgate cluster benchmark: 3 nodes on this machine, %d shards, %d clients, %s per run, node flags %q\n\n",
		shards, clients, duration, nodeArgs)
	fmt.Printf("%-34s %14s %14s %10s %10s\n", "workload", "calls/s", "decisions/s", "p50", "p99")

	lim := &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 1000, WindowMs: 1000}
	key := func(r *rand.Rand) string { return fmt.Sprintf("user:%d", r.IntN(keys)) }

	prof := func(name string) func() {
		if profileDir == "" {
			return func() {}
		}
		return profileNode(c.Nodes[0].HTTP, filepath.Join(profileDir, name+".pprof"), warmup, duration)
	}
	done := prof("health")
	health := measure(clients, duration, warmup, func(i int, _ *rand.Rand) (int, error) {
		_, err := healthpb.NewHealthClient(c.Nodes[i%3].Conn()).Check(context.Background(), &healthpb.HealthCheckRequest{})
		return 1, err
	})
	done()
	health.print("gRPC health check (reference)")
	done = prof("allow")

	single := measure(clients, duration, warmup, func(_ int, r *rand.Rand) (int, error) {
		_, err := cl.Allow(context.Background(), &pb.AllowRequest{Key: key(r), Limit: lim})
		return 1, err
	})
	done()
	single.print("Allow, strict, sliding log")
	done = prof("batch")

	batched := measure(clients, duration, warmup, func(_ int, r *rand.Rand) (int, error) {
		reqs := make([]*pb.AllowRequest, batch)
		for i := range reqs {
			reqs[i] = &pb.AllowRequest{Key: key(r), Limit: lim}
		}
		_, err := cl.AllowBatch(context.Background(), reqs)
		return batch, err
	})
	done()
	batched.print(fmt.Sprintf("AllowBatch of %d, strict", batch))

	fmt.Printf("\nsingle Allow / health check:        %.2f (goal at least 0.5)\n", single.callsPerSec()/health.callsPerSec())
	fmt.Printf("batched decisions / single Allow:   %.1f (goal at least 20)\n", batched.decisionsPerSec()/single.callsPerSec())
	if perAlgorithm <= 0 {
		return nil
	}
	return compareModes(ctx, c, cl, clients, perAlgorithm, warmup, batch, key, prof, health.callsPerSec())
}

// algorithmLimits are the limits the per-algorithm runs use: generous, so
// most checks are admitted and counted (the costly path).
var algorithmLimits = []*pb.Limit{
	{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 100, WindowMs: 1000},
	{Algorithm: pb.Algorithm_SLIDING_COUNTER, Limit: 1000, WindowMs: 60_000, Buckets: 60},
	{Algorithm: pb.Algorithm_SLIDING_COUNTER_WEIGHTED, Limit: 1000, WindowMs: 60_000, Buckets: 60},
	{Algorithm: pb.Algorithm_FIXED_WINDOW, Limit: 1000, WindowMs: 60_000},
	{Algorithm: pb.Algorithm_TOKEN_BUCKET, Limit: 1000, WindowMs: 60_000, Burst: 100},
	{Algorithm: pb.Algorithm_GCRA, Limit: 1000, WindowMs: 1000, Burst: 10},
}

// compareModes measures single Allow calls against a strict and a fast
// policy of every algorithm, and batches against the fast sliding log.
func compareModes(ctx context.Context, c *e2e.Cluster, cl *client.Client, clients int, duration, warmup time.Duration,
	batch int, key func(*rand.Rand) string, prof func(string) func(), healthRate float64) error {
	var fastLog float64
	var policies []*pb.Policy
	for _, l := range algorithmLimits {
		for _, mode := range []pb.Consistency{pb.Consistency_CONSISTENCY_STRICT, pb.Consistency_CONSISTENCY_FAST} {
			policies = append(policies, &pb.Policy{Name: policyName(l, mode), Consistency: mode,
				Limits: []*pb.PolicyLimit{{Limit: l}}})
		}
	}
	if _, err := c.Nodes[0].Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: policies}); err != nil {
		return err
	}
	time.Sleep(time.Second) // every node learns the policies
	fmt.Printf("\nsingle Allow per algorithm and consistency (%s each):\n", duration)
	fmt.Printf("%-34s %14s %14s %10s %10s\n", "policy", "calls/s", "decisions/s", "p50", "p99")
	for _, l := range algorithmLimits {
		for _, mode := range []pb.Consistency{pb.Consistency_CONSISTENCY_STRICT, pb.Consistency_CONSISTENCY_FAST} {
			name := policyName(l, mode)
			done := prof(name)
			r := measure(clients, duration, warmup, func(_ int, rr *rand.Rand) (int, error) {
				_, err := cl.Allow(context.Background(), &pb.AllowRequest{Key: key(rr), Policy: name})
				return 1, err
			})
			done()
			r.print(name)
			if mode == pb.Consistency_CONSISTENCY_FAST && l.Algorithm == pb.Algorithm_SLIDING_LOG {
				fastLog = r.callsPerSec()
			}
		}
	}
	fast := policyName(algorithmLimits[0], pb.Consistency_CONSISTENCY_FAST)
	r := measure(clients, duration, warmup, func(_ int, rr *rand.Rand) (int, error) {
		reqs := make([]*pb.AllowRequest, batch)
		for i := range reqs {
			reqs[i] = &pb.AllowRequest{Key: key(rr), Policy: fast}
		}
		_, err := cl.AllowBatch(context.Background(), reqs)
		return batch, err
	})
	r.print(fmt.Sprintf("AllowBatch of %d, %s", batch, fast))
	fmt.Printf("\nfast single Allow (sliding log) / health check: %.2f\n", fastLog/healthRate)
	fmt.Printf("fast batched decisions / fast single Allow:     %.1f\n", r.decisionsPerSec()/fastLog)
	return nil
}

func policyName(l *pb.Limit, mode pb.Consistency) string {
	m := "strict"
	if mode == pb.Consistency_CONSISTENCY_FAST {
		m = "fast"
	}
	return m + "-" + strings.ToLower(l.Algorithm.String())
}

// profileNode starts fetching a CPU profile of the node serving HTTP at
// addr, covering the measured part of a workload; the returned function
// waits for it.
func profileNode(addr, path string, warmup, duration time.Duration) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(warmup)
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(duration.Seconds()))
		resp, err := http.Get(url)
		if err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
	}()
	return func() { <-done }
}

// result is one measured workload.
type result struct {
	calls, decisions, errors int64
	elapsed                  time.Duration
	hist                     *hdrhistogram.Histogram
	firstErr                 error
}

func (r *result) callsPerSec() float64     { return float64(r.calls) / r.elapsed.Seconds() }
func (r *result) decisionsPerSec() float64 { return float64(r.decisions) / r.elapsed.Seconds() }

func (r *result) print(name string) {
	fmt.Printf("%-34s %14.0f %14.0f %10s %10s", name, r.callsPerSec(), r.decisionsPerSec(),
		time.Duration(r.hist.ValueAtQuantile(50)).Round(time.Microsecond),
		time.Duration(r.hist.ValueAtQuantile(99)).Round(time.Microsecond))
	if r.errors > 0 {
		fmt.Printf("  (%d errors, first: %v)", r.errors, r.firstErr)
	}
	fmt.Println()
}

// measure runs op from clients goroutines: first for warmup, then for
// duration, recording every call's latency.
func measure(clients int, duration, warmup time.Duration, op func(i int, r *rand.Rand) (int, error)) *result {
	res := &result{hist: hdrhistogram.New(1, int64(10*time.Second), 3)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	measureFrom := start.Add(warmup)
	end := measureFrom.Add(duration)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 42))
			local := hdrhistogram.New(1, int64(10*time.Second), 3)
			var calls, decisions, errs int64
			var firstErr error
			for {
				t0 := time.Now()
				if t0.After(end) {
					break
				}
				n, err := op(i, r)
				if t0.Before(measureFrom) {
					continue
				}
				calls++
				if err != nil {
					errs++
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				decisions += int64(n)
				_ = local.RecordValue(int64(time.Since(t0)))
			}
			mu.Lock()
			res.calls += calls
			res.decisions += decisions
			res.errors += errs
			if res.firstErr == nil {
				res.firstErr = firstErr
			}
			res.hist.Merge(local)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = duration
	return res
}
