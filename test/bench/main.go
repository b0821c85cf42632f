package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	clients, batch, keys, heldRate, shards int
	rounds                                 int
	duration, warmup, perAlgorithm         time.Duration
	idle, idleSettle                       time.Duration
	failover                               failoverOptions
	scaleNodes                             int
	micro                                  bool
	ghz                                    string
	ghzConns                               int
	nodeArgs, profile                      string
	// only, when not empty, names the phases to run (phaseNames).
	only map[string]bool
}

// phaseNames are the phases --only can pick.
var phaseNames = []string{"ceiling", "idle", "ghz", "sdk", "algorithms", "failover", "scale", "micro"}

// runs reports whether phase is to run.
func (o options) runs(phase string) bool { return len(o.only) == 0 || o.only[phase] }

func parseFlags() options {
	var o options
	flag.IntVar(&o.clients, "clients", 64, "concurrent callers of every closed-loop workload (ghz --concurrency and SDK goroutines)")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of the health check and every workload, each figure the median round's (see rounds.go)")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "length of each measurement")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each measurement")
	flag.IntVar(&o.batch, "batch", 100, "checks per AllowBatch call")
	flag.IntVar(&o.keys, "keys", 100_000, "distinct random keys the load spreads over")
	flag.IntVar(&o.heldRate, "held-rate", 1000, "calls/s of the held-rate workloads")
	flag.DurationVar(&o.perAlgorithm, "per-algorithm", 5*time.Second, "length of each per-algorithm SDK run (0 skips them)")
	flag.DurationVar(&o.idle, "idle", 10*time.Second, "how long the idle cluster's CPU is sampled (0 skips it)")
	flag.DurationVar(&o.idleSettle, "idle-settle", 5*time.Second, "quiet time before the idle sample")
	flag.IntVar(&o.failover.reps, "failover-reps", 3, "leader kills (0 skips failover)")
	flag.IntVar(&o.failover.keys, "failover-keys", 32, "probe keys per client during failover")
	flag.DurationVar(&o.failover.interval, "failover-interval", 100*time.Millisecond, "pause between a probe key's answered checks")
	flag.DurationVar(&o.failover.deadline, "failover-deadline", 15*time.Second, "longest wait for a killed leader's shards")
	flag.IntVar(&o.scaleNodes, "scale-nodes", 5, "size of the larger cluster compared with 3 nodes (0 skips it)")
	flag.BoolVar(&o.micro, "micro", true, "run every Go benchmark of window/ and fsm/ (false: only the memory ones)")
	flag.StringVar(&o.ghz, "ghz", "bin/tools/ghz", "ghz binary; installed there with go install if missing")
	flag.IntVar(&o.ghzConns, "ghz-connections", 1, "gRPC connections ghz spreads its callers over")
	flag.IntVar(&o.shards, "shards", 0, "--shards of the clusters (0: the daemon's default)")
	flag.StringVar(&o.nodeArgs, "node-args", "", "extra flags for every node, space-separated (default: none, the daemon's defaults)")
	flag.StringVar(&o.profile, "profile", "", "save node n1's CPU profile of each workload into this directory (adds --pprof)")
	only := flag.String("only", "", "comma-separated phases to run, of "+strings.Join(phaseNames, ", ")+" (default: all; scale needs ghz)")
	quick := flag.Bool("quick", false, "short run: one round, 3s measurements, 5s idle, 2 kills, no per-algorithm runs, only the memory benchmarks (explicit flags win)")
	flag.Parse()
	if *quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range map[string]string{"rounds": "1", "duration": "3s", "per-algorithm": "0", "idle": "5s",
			"idle-settle": "2s", "failover-reps": "2", "micro": "false"} {
			if !set[name] {
				_ = flag.Set(name, v)
			}
		}
	}
	if o.rounds < 1 {
		fmt.Fprintln(os.Stderr, "bench: --rounds must be at least 1")
		os.Exit(2)
	}
	o.failover.retry = 20 * time.Millisecond
	for _, p := range strings.FieldsFunc(*only, func(r rune) bool { return r == ',' }) {
		if !slices.Contains(phaseNames, p) {
			fmt.Fprintf(os.Stderr, "bench: --only: unknown phase %q (phases: %s)\n", p, strings.Join(phaseNames, ", "))
			os.Exit(2)
		}
		if o.only == nil {
			o.only = map[string]bool{}
		}
		o.only[p] = true
	}
	return o
}

func main() {
	o := parseFlags()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// cleanups run at the end, or when the bench is interrupted, so that no
// node process outlives it.
var (
	cleanupMu sync.Mutex
	cleanups  []func()
)

func atExit(f func()) {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	cleanups = append(cleanups, f)
}

func runCleanups() {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cleanups = nil
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintln(os.Stderr, "bench: interrupted, stopping the nodes")
		runCleanups()
		os.Exit(1)
	}()
	defer runCleanups()

	args := strings.Fields(o.nodeArgs)
	if o.shards > 0 {
		args = append(args, "--shards", fmt.Sprint(o.shards))
	}
	if o.profile != "" {
		args = append(args, "--pprof")
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "floodgate-bench")
	if err != nil {
		return err
	}
	if os.Getenv("BENCH_KEEP") == "" {
		atExit(func() { os.RemoveAll(dir) })
	} else {
		fmt.Println("keeping", dir)
	}
	start := time.Now()
	rp := &report{out: os.Stdout, header: header(o, args)}
	for _, h := range rp.header {
		fmt.Println(h)
	}
	if err := benchClusters(ctx, rp, o, args, dir); err != nil {
		return err
	}
	if o.runs("micro") {
		metrics, err := goBenchmarks(o.micro)
		if err != nil {
			rp.note("Go benchmarks: %v", err)
		}
		for _, r := range memoryRows(metrics) {
			rp.add(r)
		}
	}
	rp.note("the whole run took %s", time.Since(start).Round(time.Second))
	rp.print()
	return nil
}
