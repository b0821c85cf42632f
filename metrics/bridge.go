package metrics

import (
	"fmt"
	"time"

	gometrics "github.com/armon/go-metrics"
	gmprom "github.com/armon/go-metrics/prometheus"
)

// bridged are the prefixes of hashicorp/raft's and memberlist's own
// metrics that reach Registry. Raft also times every step of every log
// entry (raft.net.*, raft.rpc.appendEntries.*, raft.fsm.apply, the
// replication counters, twice with and without labels); each sample is a
// Prometheus summary update under a lock, and together they cost 4-5% of a
// strict check's CPU on a busy node while floodgate's own histograms
// already measure the same path (group commit, fsync, forwards). So only
// what an operator watches for a group's health passes (not even the
// heartbeat timings: on an idle node they were 15% of its CPU, nor
// raft.verify_leader, which counts the heartbeat grid's instants): state
// changes, elections, leader contact, commit time, snapshots, membership.
// raft.peers is left out: every group of a node writes the one series, so
// it shows whichever group wrote last.
var bridged = []string{
	"raft.state.",
	"raft.transition.",
	"raft.candidate.",
	"raft.leader.lastContact",
	"raft.commitTime",
	"raft.snapshot.",
	"raft.fsm.snapshot",
	"raft.fsm.restore",
	"raft.fsm.lastRestoreDuration",
	"raft.restore",
	"raft.barrier",
	"raft.rpc.requestVote",
	"raft.rpc.installSnapshot",
	"raft.replication.installSnapshot",
	"raft.compactLogs",
	"raft.removeOldLogs",
	"memberlist.",
}

// blocked are names under bridged that mislead: memberlist's
// size.local reads the wrong bytes of its message (a gauge of billions).
var blocked = []string{"memberlist.size.local"}

// Bridge routes what hashicorp/raft and memberlist emit through go-metrics
// (raft_*, memberlist_*; they use armon/go-metrics through go-metrics'
// compat package) into Registry, the names in bridged only. Call it once,
// before the node starts.
func Bridge() error {
	sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{
		Name:       "floodgate_gometrics",
		Registerer: Registry,
		// A series nobody updates for this long (a removed peer's) goes.
		Expiration: 5 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("metrics: go-metrics bridge: %w", err)
	}
	if _, err := gometrics.NewGlobal(bridgeConfig(), sink); err != nil {
		return fmt.Errorf("metrics: go-metrics bridge: %w", err)
	}
	return nil
}

// bridgeConfig is the go-metrics configuration of the bridge.
func bridgeConfig() *gometrics.Config {
	cfg := gometrics.DefaultConfig("")
	cfg.EnableHostname = false
	cfg.EnableHostnameLabel = false
	cfg.EnableRuntimeMetrics = false // the Go collector has them
	cfg.EnableTypePrefix = false
	cfg.FilterDefault = false
	cfg.AllowedPrefixes = bridged
	cfg.BlockedPrefixes = blocked
	return cfg
}
