package fuzzseed

import (
	"time"

	"github.com/floodgate/floodgate/policy"
	"github.com/floodgate/floodgate/window"
)

// Policies returns valid policies covering every mode, consistency and
// algorithm, with and without names, reduced limits and key_by: the
// material of well-formed seeds.
func Policies() []*policy.Policy {
	const sec = int64(time.Second)
	lim := func(name string, alg window.Algorithm, limit, win int64) policy.Limit {
		return policy.Limit{Name: name, Limit: window.Limit{Algorithm: alg, Limit: limit, Window: win}}
	}
	counter := lim("per-hour", window.SlidingCounter, 500, 3600*sec)
	counter.Buckets = 60
	weighted := lim("", window.SlidingCounterWeighted, 100, 60*sec)
	weighted.Buckets = 10
	bucket := lim("tb", window.TokenBucket, 10, sec)
	bucket.Burst = 20
	gcra := lim("", window.GCRA, 5, sec)
	gcra.Burst = 2
	monthly := policy.Limit{Name: "monthly", Limit: window.Limit{Algorithm: window.FixedWindow, Limit: 20000, Calendar: window.CalendarMonth}}
	reduced := lim("slow-lane", window.SlidingLog, 10, 60*sec)
	return []*policy.Policy{
		// An inline limit, as requests without a policy carry.
		{Limits: []policy.Limit{lim("", window.SlidingLog, 3, 60*sec)}},
		{Name: "api", KeyBy: []string{"user", "ip"}, Limits: []policy.Limit{lim("per-minute", window.SlidingLog, 10, 60*sec), counter}},
		{Name: "soft", Mode: policy.Soft, SoftPercent: 10, Limits: []policy.Limit{weighted}},
		{Name: "shadow", Mode: policy.Shadow, CountDenied: true, Limits: []policy.Limit{lim("", window.FixedWindow, 7, 10*sec), monthly}},
		{Name: "elastic", Mode: policy.Elastic, ElasticCeilingPercent: 200, ElasticCapacity: 1000, Limits: []policy.Limit{bucket}},
		{Name: "fast", Consistency: policy.Fast, Limits: []policy.Limit{gcra}},
		{Name: "reduced", CountDenied: true, Limits: []policy.Limit{counter}, Reduced: &reduced},
		{Name: "shop", Colocate: true, Limits: []policy.Limit{lim("", window.SlidingLog, 4, 60*sec)}},
	}
}
