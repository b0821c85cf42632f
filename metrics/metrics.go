package metrics

import (
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc/codes"
)

// Registry is what /metrics serves.
var Registry = prometheus.NewRegistry()

// Reasons a check was shed (the reason label of ChecksShed).
const (
	ShedMaxWaiting = "max_waiting"
	ShedBacklog    = "backlog"
)

// Outcomes of a decision (the outcome label of Decisions).
const (
	Allowed      = "allowed"
	Denied       = "denied"
	ShadowDenied = "shadow_denied" // shadow mode: admitted, enforcing would have denied
)

var (
	// Decisions counts the answers a node gave its clients, by policy
	// ("inline" for an inline limit), the limit that decided, outcome and
	// consistency (strict or fast).
	Decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_decisions_total",
		Help: "Rate-limit decisions answered by this node, by policy, deciding limit, outcome and consistency.",
	}, []string{"policy", "limit", "outcome", "consistency"})

	// CheckErrors counts checks answered with an error, by gRPC code:
	// refused before dispatch (not ready, invalid) or failed on the way.
	CheckErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_check_errors_total",
		Help: "Checks that failed (no decision), by gRPC status code.",
	}, []string{"code"})

	// ChecksWaiting is how many checks this node's entry points took and
	// have not answered yet; ChecksShed counts checks refused uncounted
	// for overload, by reason: ShedMaxWaiting (ChecksWaiting was at
	// --max-checks-waiting) or ShedBacklog (a group's leader behind a
	// backlog longer than the check's deadline).
	ChecksWaiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "floodgate_checks_waiting",
		Help: "Checks this node's entry points (gRPC, Envoy RLS, HTTP) took and have not answered yet: what --max-checks-waiting bounds.",
	})
	ChecksShed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_checks_shed_total",
		Help: "Checks refused uncounted for overload (Unavailable, HTTP 503), by reason: max_waiting (this node's entry points waited on --max-checks-waiting checks), backlog (a group led here had more queued than the check's deadline let it wait for).",
	}, []string{"reason"})

	// ForwardedChecks counts checks this node sent to another node's
	// leader; ForwardBatchSize is how many went in each call.
	ForwardedChecks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "floodgate_forwarded_checks_total",
		Help: "Checks forwarded to the leader on another node.",
	})
	ForwardBatchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "floodgate_forward_batch_size",
		Help:    "Checks per Forward call to a peer.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})

	// GroupCommitSize is how many checks a shard leader wrote in one log
	// entry (group commit).
	GroupCommitSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "floodgate_group_commit_checks",
		Help:    "Checks per Raft log entry written by a shard leader (group commit).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})

	// GroupCommitSeconds is how long a shard leader's log entry took from
	// Apply to its answer (written, replicated to a quorum, applied): the
	// Raft round a strict check waits for, beside the linger before it.
	GroupCommitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "floodgate_group_commit_duration_seconds",
		Help:    "Time from a shard leader's Raft Apply of a log entry (group commit) to its answer.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})

	// FsyncSeconds is the time of each flush of the node's shared Raft
	// log; StoresPerFlush is how many log stores (of all groups) each
	// flush made durable.
	FsyncSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "floodgate_raftlog_fsync_duration_seconds",
		Help:    "Duration of each fsync of the node's shared Raft log.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14),
	})
	StoresPerFlush = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "floodgate_raftlog_stores_per_flush",
		Help:    "Raft log stores, of all groups, made durable by one write and fsync.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10),
	})

	// GRPCServer is the gRPC server's metrics: grpc_server_started_total,
	// grpc_server_handled_total by code, grpc_server_handling_seconds,
	// for every service and method (Allow, AllowBatch, ShouldRateLimit,
	// Forward, ...).
	GRPCServer = grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets(latencyBuckets),
	))

	// OtherClusterRefusals counts the node-to-node handshakes (Raft, both
	// ways) and Peer calls this node refused because the other node is of
	// another cluster: a member's address held by a node of another
	// cluster (cluster.Node.AdmitPeer).
	OtherClusterRefusals = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "floodgate_other_cluster_refusals_total",
		Help: "Raft handshakes and Peer calls refused because the other node belongs to another cluster.",
	})

	// LeaderChanges counts the leaderships this node's replicas took: each
	// change of a group's leader counts once in the cluster, on its new
	// leader (every replica observes it).
	LeaderChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_leader_changes_total",
		Help: "Leaderships this node's Raft groups took (group is meta or shard): summed over nodes, each leader change once.",
	}, []string{"group"})
)

// latencyBuckets are the buckets of a call's time, gRPC's and HTTP's
// alike: from half a millisecond (a local check) to seconds (a failover).
var latencyBuckets = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// ours is every collector this package defines.
func ours() []prometheus.Collector {
	return []prometheus.Collector{
		Decisions, CheckErrors, ChecksWaiting, ChecksShed, ForwardedChecks, ForwardBatchSize, GroupCommitSize, GroupCommitSeconds,
		FsyncSeconds, StoresPerFlush, LeaderChanges, OtherClusterRefusals, GRPCServer, HTTPRequests, HTTPSeconds,
		nodeCollector{}, certCollector{},
	}
}

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range ours() {
		switch c.(type) {
		case nodeCollector, certCollector: // registered with their readers by RegisterNode, RegisterCertificates
		default:
			Registry.MustRegister(c)
		}
	}
	// The failures a healthy node has not had yet are served as 0, so
	// that rate() and the dashboard's panel see the series from the start.
	for _, c := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded} {
		CheckErrors.WithLabelValues(c.String())
	}
	for _, r := range []string{ShedMaxWaiting, ShedBacklog} {
		ChecksShed.WithLabelValues(r)
	}
}

// Outcome is the outcome label of an answer.
func Outcome(allowed, wouldDeny bool) string {
	switch {
	case wouldDeny:
		return ShadowDenied
	case allowed:
		return Allowed
	}
	return Denied
}
