package fault

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// maxCost is the largest cost of a check the load sends: fast mode's
// bound grows with it (README: 2 × (--fast-max-pending + the largest
// cost) per failover).
const maxCost = 3

// Load is a bounded, paced stream of checks on the hot keys, sent by one
// worker per caller (or several) and recorded in a history.
type Load struct {
	H       *History
	Callers []Caller
	Workers int // per caller
	Keys    []string
	// Spend is each key's share of the calls, as the multiple of its limit
	// it should be asked for over the run: above 1 it runs out (early with
	// 2.5, near the end with 1.25), below 1 it keeps room throughout.
	Spend []float64
	// Request builds the check of key with cost (0: a peek).
	Request func(key string, cost int64) *pb.AllowRequest
	// Interval paces each worker: one call per interval at most.
	Interval time.Duration
	// Timeout bounds each call; it must exceed --leader-wait so a shard
	// without a leader answers Unavailable rather than timing out.
	Timeout time.Duration
	Seed    uint64
}

// Pace returns the per-worker interval that asks each key for spend[i]×
// its limit over d, given the number of workers: a quarter of the calls
// peek and the others cost 1–3 (1.5 per call on average).
func Pace(d time.Duration, workers int, limit int64, spend []float64) time.Duration {
	var total float64
	for _, s := range spend {
		total += s
	}
	calls := total * float64(limit) / 1.5 // over d, all workers
	return time.Duration(float64(d) * float64(workers) / calls)
}

// pick draws a key index with probability proportional to its spend.
func (l *Load) pick(rng *rand.Rand) int {
	var total float64
	for _, s := range l.Spend {
		total += s
	}
	x := rng.Float64() * total
	for i, s := range l.Spend {
		if x < s {
			return i
		}
		x -= s
	}
	return len(l.Spend) - 1
}

// Run sends checks until stop is closed or d has passed, whichever comes
// first, and returns once every worker has returned.
func (l *Load) Run(ctx context.Context, stop <-chan struct{}, d time.Duration) {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	id := 0
	for _, c := range l.Callers {
		for w := 0; w < l.Workers; w++ {
			wg.Add(1)
			go func(id int, c Caller) {
				defer wg.Done()
				l.worker(ctx, stop, deadline, id, c)
			}(id, c)
			id++
		}
	}
	wg.Wait()
}

func (l *Load) worker(ctx context.Context, stop <-chan struct{}, deadline time.Time, id int, c Caller) {
	rng := rand.New(rand.NewPCG(l.Seed, uint64(id)))
	next := time.Now()
	for time.Now().Before(deadline) {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		next = next.Add(l.Interval)
		if now := time.Now(); next.Before(now) {
			next = now // a slow call does not cause a burst after it
		}
		key := l.Keys[l.pick(rng)]
		cost := int64(0)
		if rng.IntN(4) != 0 {
			cost = 1 + rng.Int64N(maxCost)
		}
		if c.Up != nil && !c.Up() {
			continue
		}
		l.H.Do(ctx, id, c, l.Request(key, cost), l.Timeout)
	}
}
