package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NodeGauges is what a node holds at the moment of a scrape.
type NodeGauges struct {
	Replicas    int            // shard replicas on this node
	Leading     int            // of them, those this node leads
	Leaderless  int            // of them, those that know no leader
	MetaLeader  bool           // this node leads the meta group
	Keys        int64          // key states held by the groups led here
	KeyBytes    int64          // what those states hold, in bytes (--max-state-mib)
	LogBytes    int64          // the entries the shard replicas here keep in the Raft log, in bytes (--raft-log-mib)
	KeysRefused int64          // checks refused for want of room for new key states, since start
	FastPending int64          // fast-mode cost answered, not yet committed
	Members     map[string]int // cluster members by health, as gossip sees them
	ClockOffset *time.Duration // the other nodes' median clock offset from this node's (nil: no reading)
	ClockHeld   time.Duration  // a step of this node's clock its stamps do not follow yet (0: none)
	// GroupIDsLeft is how many groups the cluster can still add, by this
	// node's meta state (nil: a legacy cluster, or none known yet).
	GroupIDsLeft *int
}

var (
	replicasDesc    = prometheus.NewDesc("floodgate_replicas", "Shard replicas on this node.", nil, nil)
	leadingDesc     = prometheus.NewDesc("floodgate_groups_led", "Shard groups this node leads.", nil, nil)
	leaderlessDesc  = prometheus.NewDesc("floodgate_groups_leaderless", "Shard replicas on this node that know no leader.", nil, nil)
	metaLeaderDesc  = prometheus.NewDesc("floodgate_meta_leader", "1 when this node leads the meta group.", nil, nil)
	keysDesc        = prometheus.NewDesc("floodgate_keys", "Key states held by the shard groups this node leads.", nil, nil)
	keyBytesDesc    = prometheus.NewDesc("floodgate_key_state_bytes", "Bytes the key states of the shard groups this node leads hold (records, keys, sliding logs' and counters' buffers): what --max-state-mib bounds, per group.", nil, nil)
	logBytesDesc    = prometheus.NewDesc("floodgate_raft_log_bytes", "Bytes of the entries the shard replicas on this node keep in the Raft log (each group about --raft-log-mib, or its states' size if more).", nil, nil)
	keysRefusedDesc = prometheus.NewDesc("floodgate_key_states_refused_total", "Checks that groups led here refused (in shadow mode: answered would-deny) because they hold --max-key-states key states or --max-state-mib.", nil, nil)
	fastPendingDesc = prometheus.NewDesc("floodgate_fast_pending_cost", "Fast-mode cost answered by leaders here and not yet committed.", nil, nil)
	clockOffsetDesc = prometheus.NewDesc("floodgate_clock_offset_seconds", "How far the other nodes' clocks are ahead of this node's (their median; negative: behind) at the last reading.", nil, nil)
	clockHeldDesc   = prometheus.NewDesc("floodgate_clock_step_held_seconds", "How far this node's clock stepped (NTP, date) from the time its checks are stamped with, until a majority of the cluster reads the new time: 0 while the stamps follow the clock.", nil, nil)
	groupIDsDesc    = prometheus.NewDesc("floodgate_group_ids_left", "Groups the cluster can still add in its life: ids are never used twice, and each node that joins, or comes back after its group was drained away, takes --groups-per-node.", nil, nil)
	membersDesc     = prometheus.NewDesc("floodgate_members", "Cluster members by health, as this node's gossip sees them.", []string{"state"}, nil)
)

// nodeCollector reads NodeGauges at each scrape.
type nodeCollector struct{ read func() NodeGauges }

// RegisterNode adds the gauges of a node, read by read at each scrape, to
// Registry. A process runs one node: call it once.
func RegisterNode(read func() NodeGauges) error {
	return Registry.Register(nodeCollector{read})
}

// Describe implements prometheus.Collector.
func (nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{replicasDesc, leadingDesc, leaderlessDesc, metaLeaderDesc, keysDesc, keyBytesDesc, logBytesDesc, keysRefusedDesc, fastPendingDesc, clockOffsetDesc, clockHeldDesc, groupIDsDesc, membersDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	g := c.read()
	meta := 0.0
	if g.MetaLeader {
		meta = 1
	}
	for d, v := range map[*prometheus.Desc]float64{
		replicasDesc: float64(g.Replicas), leadingDesc: float64(g.Leading), leaderlessDesc: float64(g.Leaderless),
		metaLeaderDesc: meta, keysDesc: float64(g.Keys), keyBytesDesc: float64(g.KeyBytes), logBytesDesc: float64(g.LogBytes), fastPendingDesc: float64(g.FastPending),
		clockHeldDesc: g.ClockHeld.Seconds(),
	} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	ch <- prometheus.MustNewConstMetric(keysRefusedDesc, prometheus.CounterValue, float64(g.KeysRefused))
	if g.ClockOffset != nil { // absent, not 0, while nothing was read
		ch <- prometheus.MustNewConstMetric(clockOffsetDesc, prometheus.GaugeValue, g.ClockOffset.Seconds())
	}
	if g.GroupIDsLeft != nil {
		ch <- prometheus.MustNewConstMetric(groupIDsDesc, prometheus.GaugeValue, float64(*g.GroupIDsLeft))
	}
	for state, n := range g.Members {
		ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(n), state)
	}
}
