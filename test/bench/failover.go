package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/client"
	"github.com/floodgate/floodgate/test/e2e"
)

// failoverOptions shape the failover measurement.
type failoverOptions struct {
	reps     int           // kills, each followed by a restart and settling
	keys     int           // probe keys per client, spread over the shards
	interval time.Duration // pause between a probe key's answered checks (light load)
	retry    time.Duration // pause after a failed check
	deadline time.Duration // give up on a kill after this long
}

// probeLimit is the probes' inline strict limit: never reached by them.
var probeLimit = &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 1000, WindowMs: 1000}

// prober sends one check on a key through one client.
type prober struct {
	name  string
	allow func(ctx context.Context, key string) error
}

// slowCall is how long a check must take to count as having waited for a
// leader: its key's shard was led by the victim.
const slowCall = 250 * time.Millisecond

// keyTime is one probe key's failover time in one kill.
type keyTime struct {
	d        time.Duration // from the kill until a check invoked after it was answered; -1 never
	affected bool          // a check invoked after the kill failed or waited for a leader
}

// failoverResult holds, per client and kill, every probe key's time.
type failoverResult struct {
	clients []string
	kills   map[string][][]keyTime
	led     []int // shards the victim led, per kill (-1 unknown)
}

// measureFailover kills a node other than the first (the plain client's
// entry node) with SIGKILL, opts.reps times, while every client checks
// opts.keys keys at a light pace. A key's failover time is from the kill
// until a check on it invoked after the kill was answered. The keys whose
// shard the victim led are told apart without knowing the key-to-shard
// mapping (which the daemon may change): a check on them invoked after the
// kill failed or waited for a leader. Between kills the victim is
// restarted and the cluster settles (leaders back in place).
func measureFailover(ctx context.Context, c *e2e.Cluster, cl *client.Client, opts failoverOptions) (*failoverResult, error) {
	entry := c.Nodes[0].Limiter()
	probers := []prober{
		{name: "plain gRPC → n1", allow: func(ctx context.Context, key string) error {
			_, err := entry.Allow(ctx, &pb.AllowRequest{Key: key, Limit: probeLimit})
			return err
		}},
		{name: "Go SDK", allow: func(ctx context.Context, key string) error {
			_, err := cl.Allow(ctx, &pb.AllowRequest{Key: key, Limit: probeLimit})
			return err
		}},
	}
	res := &failoverResult{kills: map[string][][]keyTime{}}
	for _, p := range probers {
		res.clients = append(res.clients, p.name)
	}
	for rep := range opts.reps {
		victim := c.Nodes[1+rep%(len(c.Nodes)-1)]
		res.led = append(res.led, shardsLedBy(ctx, c, victim.ID))
		times, err := killOnce(ctx, victim, probers, opts, rep)
		if err != nil {
			return nil, err
		}
		for i, p := range probers {
			res.kills[p.name] = append(res.kills[p.name], times[i])
		}
		fmt.Printf("  failover %d/%d: killed %s (leading %d shards):", rep+1, opts.reps, victim.ID, res.led[rep])
		for i, p := range probers {
			fmt.Printf(" %s %s;", p.name, summarize([][]keyTime{times[i]}))
		}
		fmt.Println()
		if err := victim.Start(); err != nil {
			return nil, fmt.Errorf("restart %s: %w", victim.ID, err)
		}
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		err = victim.WaitServing(sctx)
		if err == nil {
			err = c.WaitSettled(sctx)
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("after restarting %s: %w", victim.ID, err)
		}
	}
	return res, nil
}

// killOnce runs the probes, kills victim once they all answer, and returns
// per prober every key's failover time.
func killOnce(ctx context.Context, victim *e2e.Node, probers []prober, opts failoverOptions, rep int) ([][]keyTime, error) {
	base := time.Now()
	var killAt atomic.Int64 // since base; 0 before the kill
	first := make([][]atomic.Int64, len(probers))
	affected := make([][]atomic.Bool, len(probers))
	var answered atomic.Int64 // keys answered at least once before the kill
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for pi, p := range probers {
		first[pi] = make([]atomic.Int64, opts.keys)
		affected[pi] = make([]atomic.Bool, opts.keys)
		for k := range opts.keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("failover:%d:%d", rep, k)
				seen := false
				for pctx.Err() == nil {
					call := time.Since(base)
					cctx, cancel := context.WithTimeout(pctx, 5*time.Second)
					err := p.allow(cctx, key)
					cancel()
					ret := time.Since(base)
					if ka := killAt.Load(); ka != 0 && int64(call) >= ka && (err != nil || ret-call > slowCall) {
						affected[pi][k].Store(true)
					}
					pause := opts.retry
					if err == nil {
						pause = opts.interval
						if ka := killAt.Load(); ka == 0 && !seen {
							seen = true
							answered.Add(1)
						} else if ka != 0 && int64(call) >= ka && first[pi][k].Load() == 0 {
							first[pi][k].Store(max(1, int64(ret)-ka))
						}
					}
					select {
					case <-pctx.Done():
					case <-time.After(pause):
					}
				}
			}()
		}
	}
	defer func() { stop(); wg.Wait() }()
	total := int64(len(probers) * opts.keys)
	for answered.Load() < total {
		if time.Since(base) > 30*time.Second {
			return nil, fmt.Errorf("before the kill only %d of %d probe keys were answered", answered.Load(), total)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(opts.interval + 200*time.Millisecond) // a steady light load
	killAt.Store(int64(time.Since(base)))
	victim.Kill()
	killed := time.Now()
	for {
		all := true
		for pi := range probers {
			for k := range opts.keys {
				all = all && first[pi][k].Load() != 0
			}
		}
		if all || time.Since(killed) > opts.deadline {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()
	out := make([][]keyTime, len(probers))
	for pi := range probers {
		for k := range opts.keys {
			kt := keyTime{d: time.Duration(first[pi][k].Load()), affected: affected[pi][k].Load()}
			if kt.d == 0 {
				kt = keyTime{d: -1, affected: true}
			}
			out[pi] = append(out[pi], kt)
		}
	}
	return out, nil
}

// summarize describes the failover times of some kills: over the affected
// keys (one per shard or so the victim led), their median and maximum.
// Without any affected key (the victim led none of the probes' shards) it
// falls back to every key.
func summarize(kills [][]keyTime) string {
	ds, lost, n := failoverTimes(kills)
	if len(ds) == 0 {
		return "no key answered again"
	}
	s := fmt.Sprintf("p50 %s / max %s over %d keys", fmtDur(ds[len(ds)/2]), fmtDur(ds[len(ds)-1]), n)
	if lost > 0 {
		s += fmt.Sprintf(", %d never answered again", lost)
	}
	return s
}

// failoverTimes returns the sorted answered times of the affected keys of
// every kill (all keys of a kill that has none affected), how many keys
// were never answered again, and how many keys were counted.
func failoverTimes(kills [][]keyTime) (ds []time.Duration, lost, n int) {
	for _, kill := range kills {
		counted := slices.ContainsFunc(kill, func(kt keyTime) bool { return kt.affected })
		for _, kt := range kill {
			if counted && !kt.affected {
				continue
			}
			n++
			if kt.d < 0 {
				lost++
			} else {
				ds = append(ds, kt.d)
			}
		}
	}
	slices.Sort(ds)
	return ds, lost, n
}

// shardsLedBy counts the shards whose leader is node id, from the
// cluster's status (-1 if no node answers).
func shardsLedBy(ctx context.Context, c *e2e.Cluster, id string) int {
	st, err := c.Status(ctx)
	if err != nil {
		return -1
	}
	n := 0
	for _, s := range st.ShardStatus {
		if s.Leader == id {
			n++
		}
	}
	return n
}

// rows are the table rows of a failover measurement, one per client.
func (r *failoverResult) rows(nodes int) []row {
	var out []row
	led := "?"
	if len(r.led) > 0 && !slices.Contains(r.led, -1) {
		led = fmt.Sprintf("%d–%d", slices.Min(r.led), slices.Max(r.led))
	}
	for _, cl := range r.clients {
		ds, lost, _ := failoverTimes(r.kills[cl])
		fig := fmt.Sprintf("%s, %d kills", summarize(r.kills[cl]), len(r.kills[cl]))
		out = append(out, row{
			workload: fmt.Sprintf("leader failover: kill -9 of a node leading %s shards (%d nodes, light load)", led, nodes),
			client:   cl,
			figure:   fig,
			target:   "≤ " + fmtDur(targetFailover),
			verdict:  judge(len(ds) > 0 && lost == 0 && ds[len(ds)-1] <= targetFailover),
		})
	}
	return out
}
