package metrics

import (
	"fmt"
	"strings"
	"time"

	gometrics "github.com/armon/go-metrics"
	gmprom "github.com/armon/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
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

// events are the bridged counters and gauges that change only when
// something happens (an election, a member suspected or dead, a health
// score that moved). They are declared up front, at zero: a series the
// sink creates on first use is deleted after Expiration without updates,
// and created again at its new value by the next event, so after a quiet
// spell rate() and increase() never saw an election or a dead member (a
// series of 1s has no increase), and a health score that stayed degraded
// vanished. Declared series are kept.
var events = [][]string{
	{"raft", "state", "follower"},
	{"raft", "state", "candidate"},
	{"raft", "state", "leader"},
	{"raft", "transition", "heartbeat_timeout"},
	{"raft", "transition", "leader_lease_timeout"},
	{"raft", "restore"},
	{"raft", "barrier"},
	{"memberlist", "msg", "alive"},
	{"memberlist", "msg", "suspect"},
	{"memberlist", "msg", "dead"},
	{"memberlist", "degraded", "probe"},
	{"memberlist", "degraded", "timeout"},
}

// eventGauges are events' gauges: memberlist sets its health score only
// when it changes (0 is healthy).
var eventGauges = [][]string{{"memberlist", "health", "score"}}

// Bridge routes what hashicorp/raft and memberlist emit through go-metrics
// (raft_*, memberlist_*; they use armon/go-metrics through go-metrics'
// compat package) into Registry, the names in bridged only. Call it once,
// before the node starts.
func Bridge() error {
	sink, err := bridgeSink(Registry)
	if err != nil {
		return err
	}
	if _, err := gometrics.NewGlobal(bridgeConfig(), sink); err != nil {
		return fmt.Errorf("metrics: go-metrics bridge: %w", err)
	}
	return nil
}

// bridgeSink is the Prometheus sink of the bridge, registered with reg.
func bridgeSink(reg prometheus.Registerer) (*gmprom.PrometheusSink, error) {
	opts := gmprom.PrometheusOpts{
		Name:       "floodgate_gometrics",
		Registerer: reg,
		// A series nobody updates for this long (a removed peer's) goes;
		// events' stay.
		Expiration: 5 * time.Minute,
	}
	for _, name := range events {
		opts.CounterDefinitions = append(opts.CounterDefinitions, gmprom.CounterDefinition{Name: name, Help: strings.Join(name, ".")})
	}
	for _, name := range eventGauges {
		opts.GaugeDefinitions = append(opts.GaugeDefinitions, gmprom.GaugeDefinition{Name: name, Help: strings.Join(name, ".")})
	}
	sink, err := gmprom.NewPrometheusSinkFrom(opts)
	if err != nil {
		return nil, fmt.Errorf("metrics: go-metrics bridge: %w", err)
	}
	return sink, nil
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
