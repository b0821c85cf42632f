package main

import (
	"fmt"
	"time"
)

// The targets of issue 7, "Targets (in make bench ...)".
const (
	targetStrict      = 0.5                     // single strict Allow, × health calls/s
	targetFast        = 0.7                     // single fast Allow, × health calls/s
	targetBatch       = 3.0                     // strict AllowBatch decisions/s, × health calls/s
	targetHeldStrict  = 5 * time.Millisecond    // strict p99 at a held 1,000 calls/s
	targetHeldFast    = 2 * time.Millisecond    // fast p99 at a held 1,000 calls/s
	targetIdle        = 5.0                     // % of one core, the whole idle 3-node cluster
	targetFailover    = 1500 * time.Millisecond // leader killed → its checks answered again
	targetScale       = 0.8                     // 5-node rate / 3-node rate, health-normalised
	targetMemFixed    = 60.0                    // B per fixed-window key beyond the key's bytes
	targetMemPerStamp = 8.0                     // B per logged timestamp
	// maxErrorShare is the share of failed calls above which a load's
	// figure does not count as meeting its target.
	maxErrorShare = 0.01
)

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// healthRow is the reference row of one client.
func healthRow(workload, client string, res *result) row {
	return row{workload: workload, client: client, res: res, figure: "1× (reference)"}
}

// rateRow compares a single-check workload's calls/s with health's; min 0
// means no target.
func rateRow(workload, client string, res, health *result, min float64) row {
	rt := ratio(res.callsPerSec(), health.callsPerSec())
	r := row{workload: workload, client: client, res: res, figure: fmt.Sprintf("%.2f× health", rt)}
	if min > 0 {
		r.target = fmt.Sprintf("≥ %.1f× health", min)
		r.verdict = judge(rt >= min && res.errorShare() <= maxErrorShare)
	}
	return r
}

// batchRow compares a batch workload's decisions/s with health's calls/s;
// min 0 means no target.
func batchRow(workload, client string, res, health *result, min float64) row {
	rt := ratio(res.decisionsPerSec(), health.callsPerSec())
	r := row{workload: workload, client: client, res: res, figure: fmt.Sprintf("%.2f× health (decisions)", rt)}
	if min > 0 {
		r.target = fmt.Sprintf("decisions ≥ %.0f× health calls", min)
		r.verdict = judge(rt >= min && res.errorShare() <= maxErrorShare)
	}
	return r
}

// heldRow judges the p99 of a workload held at rps calls/s: met when the
// rate was held (95%) without errors and p99 is within max.
func heldRow(workload, client string, res, health *result, rps int, max time.Duration) row {
	held := res.callsPerSec() >= 0.95*float64(rps)
	fig := fmt.Sprintf("p99 %s (%.2f× health calls)", fmtDur(res.p99), ratio(res.callsPerSec(), health.callsPerSec()))
	if !held {
		fig = fmt.Sprintf("p99 %s, rate not held (%s of %d/s)", fmtDur(res.p99), thousands(res.callsPerSec()), rps)
	}
	return row{workload: workload, client: client, res: res, figure: fig,
		target:  "p99 ≤ " + fmtDur(max),
		verdict: judge(held && res.p99 <= max && res.errorShare() <= maxErrorShare)}
}
