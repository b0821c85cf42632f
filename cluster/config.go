package cluster

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/floodgate/floodgate/window"
)

// Defaults of a Config.
const (
	// DefaultSlots is the slot count of a new cluster: keys hash to slots,
	// slots are owned by a few Raft groups and move between them. 4096
	// slots keep a move fine-grained (1/4096 of the keys) and the slot
	// table small (16 KiB).
	DefaultSlots = 4096
	// MaxSlots bounds --slots.
	MaxSlots = 1 << 16
	// DefaultGroupsPerNode is how many groups each node is home to: one
	// keeps Raft's per-group cost (heartbeats, connections) at its least.
	DefaultGroupsPerNode = 1
	// MaxGroupsPerNode bounds --groups-per-node.
	MaxGroupsPerNode = 16
	DefaultReplicas  = 3
	// MaxShards bounds --shards (a legacy cluster: one Raft group per
	// shard, fixed at creation).
	MaxShards = 1024
	// MaxReplicas bounds --replicas.
	MaxReplicas = 7
	// DefaultMaxClockOffset is --max-clock-offset's default: far beyond
	// what NTP keeps, far below a window.
	DefaultMaxClockOffset = 500 * time.Millisecond
	// DefaultMaxKeyStates is --max-key-states's default: about 120 MB of
	// fixed-window states per group replica (60 B each; a sliding log
	// adds 8 B per timestamp), so that a flood of new keys (random client
	// addresses, say) is refused before it runs every replica of a group
	// out of memory at once.
	DefaultMaxKeyStates = 2_000_000
	// DefaultMaxStateBytes is --max-state-mib's default: a group's states
	// may hold 1 GiB per replica, eight times what the default
	// --max-key-states of fixed windows take, so that states made large
	// by their callers (inline sliding logs near --max-log-length: 80 KB
	// each) are refused before they run every replica out of memory.
	DefaultMaxStateBytes = 1 << 30
	// DefaultRaftLogBytes is --raft-log-mib's default: the bytes of Raft
	// log a group keeps, or as many as its states hold if more
	// (retention.go).
	DefaultRaftLogBytes = 64 << 20
	// minMaxClockOffset is the least --max-clock-offset (other than 0).
	minMaxClockOffset = 50 * time.Millisecond
	// DefaultMaxSyncDuration is --max-sync-duration's default: far past
	// a healthy disk's slowest flush (this VM's under load: 1.6 s), short
	// enough that a hung disk's groups fail over before callers give up.
	DefaultMaxSyncDuration = 10 * time.Second
	// minMaxSyncDuration is the least --max-sync-duration (other than 0).
	minMaxSyncDuration = time.Second
	// metaVoters is how many nodes vote in the meta group; the others
	// follow it as non-voters so every node has the membership locally.
	metaVoters = 5
)

// Config is one node's configuration.
type Config struct {
	// NodeID names the node; stable across restarts.
	NodeID string
	// DataDir holds the node's Raft logs and snapshots.
	DataDir string
	// Addresses other nodes and clients use to reach this node.
	GRPCAddr   string
	HTTPAddr   string
	RaftAddr   string
	GossipAddr string
	// RaftBind and GossipBind are where the node listens when that is not
	// the address it is reached at (0.0.0.0 in a pod, which advertises its
	// pod IP); empty: RaftAddr and GossipAddr.
	RaftBind, GossipBind string
	// Region labels the node (placement within regions comes later).
	Region string
	// Join lists gRPC addresses of cluster members to join at first start.
	// "dns:name:port" stands for every address name resolves to, looked
	// up again at each attempt (a Kubernetes headless service).
	Join []string
	// BootstrapExpect > 0 lets a node with Join create the cluster: when
	// no Join address belongs to a cluster yet, the node with the
	// smallest id among at least BootstrapExpect fresh nodes found there
	// creates it, and the others join it. Every node of a StatefulSet can
	// then start with the same arguments.
	BootstrapExpect int
	// Resolver looks up dns: join names and the host names peers
	// advertise, for Raft (nil: the system's).
	Resolver *net.Resolver
	// Slots, GroupsPerNode and Replicas apply when this node creates a
	// new cluster. Shards > 0 creates a legacy cluster instead: that many
	// shards, each its own Raft group, never moved.
	Slots         int
	GroupsPerNode int
	Shards        int
	Replicas      int

	// Fsync is how Raft writes are made durable: FsyncBatch (default),
	// FsyncAlways or FsyncOff.
	Fsync string
	// RaftTransport is how the node's groups reach their peers:
	// TransportRaftnet (default: one connection per peer node for every
	// group) or TransportLegacy (hashicorp/raft's NetworkTransport per
	// group, as releases before raftnet; a raftnet node falls back to it
	// for such peers).
	RaftTransport string
	// Raft timing. Lower timeouts fail over faster and cost more
	// heartbeats: every shard leader heartbeats every follower.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// DeadAfter is how long gossip must call a node dead before its
	// replicas are moved to other nodes. A restart or deploy shorter than
	// this moves nothing.
	DeadAfter time.Duration
	// ReconcileInterval is how often leaders compare shard replicas with
	// the placement.
	ReconcileInterval time.Duration
	// GossipInterval scales memberlist's intervals: a probe and a gossip
	// round every five, a full state sync every 75.
	GossipInterval time.Duration
	// MaxBatch is the most checks one shard log entry carries.
	MaxBatch int
	// MaxInFlight is how many entries a shard leader has uncommitted at
	// once; more requests wait and join the next entry (group commit).
	MaxInFlight int
	// CommitTimeout bounds how long a check waits for its entry to commit.
	CommitTimeout time.Duration
	// FastFlushInterval is the longest the count of a fast-consistency
	// check waits on its shard leader before it is replicated (a timer
	// starts with the first count waiting, so an idle shard never wakes);
	// FastMaxPending is the cost it lets wait (it flushes early when that
	// much is waiting, and makes further fast checks wait while a flush is
	// in flight). A failover can lose at most 2×FastMaxPending cost per
	// shard: fast mode's overshoot bound.
	FastFlushInterval time.Duration
	FastMaxPending    int64
	// MaxKeyStates bounds the key states (one per key and limit) a group
	// leader lets its group hold: a check that would add states beyond it
	// is refused (ErrFull) until old ones expire; checks of keys it holds
	// go on. 0: no bound. Entries in flight can pass it by what they carry.
	MaxKeyStates int
	// MaxStateBytes bounds the bytes a group's states hold (records, keys,
	// sliding logs' and counters' buffers) as MaxKeyStates bounds their
	// number: a check that could make them hold more is refused (ErrFull).
	// 0: no bound.
	MaxStateBytes int64
	// RaftLogBytes is the bytes of Raft log a shard group keeps before
	// it snapshots (or as many as its states hold, if more), and about
	// half that after a snapshot: raft's counts of entries follow the
	// entries' size (retention.go). 0: raft's counts alone (4,096
	// entries between snapshots, 2,048 kept).
	RaftLogBytes int64
	// MaxLogLength is the longest sliding log this node keeps
	// (--max-log-length; 0: window.DefaultMaxLogLength). Members tell
	// theirs: a stored policy must fit every member's (MaxLogLength).
	MaxLogLength int64

	// MaxClockOffset is the largest offset allowed between this node's
	// clock and the cluster's (0: not checked). Group leaders stamp checks
	// with their clocks, so a node whose clock is beyond it from a
	// majority of the cluster's stops rather than lead with it
	// (clockwatch.go). A restore refuses states whose log time is ahead
	// of this node's clock by more (CheckRestoreTime).
	MaxClockOffset time.Duration
	// MaxSyncDuration stops the node (StorageFailed) once a write or
	// fsync of its log has hung this long (0: not watched): a leader whose
	// disk hangs keeps its followers' heartbeats going, so only its stop
	// lets its groups fail over (raftlog.Options.MaxSyncDuration).
	MaxSyncDuration time.Duration

	// CheckStore checks a Raft log file after an unclean stop (nil: no
	// check). The daemon runs CheckStore in a child process.
	CheckStore func(path string) error

	// PeerTLS secures the Raft port (nil: plaintext).
	PeerTLS *PeerTLS
	// GossipKeys encrypt and authenticate gossip (AES, 16, 24 or 32
	// bytes each; none: plaintext): the first encrypts, every one
	// decrypts, so that a key rotates without a gap (Node.SetGossipKeys).
	// Each node's first key must be among every other node's keys.
	GossipKeys [][]byte

	Logger *slog.Logger
}

// PeerTLS secures the node-to-node traffic of the Raft port: each side
// presents a certificate the other verifies (mutual TLS), so only nodes
// holding a certificate of the cluster's peer CA can append to a log.
type PeerTLS struct {
	// Server answers connections other nodes open to this one; it must
	// require and verify a client certificate.
	Server *tls.Config
	// Client returns the config of a new connection to another node,
	// presenting this node's certificate and verifying theirs (a function:
	// certificates reload between connections).
	Client func() *tls.Config
}

// minRaftTimeout is the least timeout hashicorp/raft accepts.
const minRaftTimeout = 5 * time.Millisecond

// Upper bounds of durations whose larger values are typos, not choices:
// raft's timeouts bound a failover (a check waits that long for a new
// leader), a fast count waits up to its flush interval unreplicated, and
// a node gossip calls dead for a day has long needed its replicas moved.
const (
	maxRaftTimeout = time.Minute
	maxFastFlush   = time.Minute
	maxDeadAfter   = 24 * time.Hour
)

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.GroupsPerNode == 0 {
		c.GroupsPerNode = DefaultGroupsPerNode
	}
	if c.Fsync == "" {
		c.Fsync = FsyncBatch
	}
	if c.RaftTransport == "" {
		c.RaftTransport = TransportRaftnet
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.RaftBind == "" {
		c.RaftBind = c.RaftAddr
	}
	if c.GossipBind == "" {
		c.GossipBind = c.GossipAddr
	}
	def(&c.HeartbeatTimeout, 500*time.Millisecond)
	def(&c.ElectionTimeout, 500*time.Millisecond)
	def(&c.LeaderLeaseTimeout, 500*time.Millisecond)
	def(&c.DeadAfter, 30*time.Second)
	def(&c.ReconcileInterval, 250*time.Millisecond)
	def(&c.GossipInterval, 200*time.Millisecond)
	def(&c.CommitTimeout, 5*time.Second)
	def(&c.FastFlushInterval, 500*time.Millisecond)
	if c.MaxLogLength == 0 {
		c.MaxLogLength = window.DefaultMaxLogLength
	}
	if c.FastMaxPending == 0 {
		c.FastMaxPending = 1000
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 4096
	}
	if c.MaxInFlight == 0 {
		// One entry in flight per shard: checks arriving meanwhile ride in the
		// next entry, so a busy shard writes fewer, larger entries.
		c.MaxInFlight = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first unusable field, by its flag name.
func (c Config) Validate() error {
	if err := CheckNodeID("node-id", c.NodeID); err != nil {
		return err
	}
	if c.DataDir == "" {
		return fmt.Errorf("%w: data-dir: required", ErrConfig)
	}
	if c.Region != "" {
		if err := CheckNodeID("region", c.Region); err != nil {
			return err
		}
	}
	for _, a := range []struct{ flag, addr string }{
		{"grpc-addr", c.GRPCAddr}, {"raft-addr", c.RaftAddr}, {"gossip-addr", c.GossipAddr},
		{"raft-addr", c.RaftBind}, {"gossip-addr", c.GossipBind},
	} {
		if err := CheckListenAddr(a.flag, a.addr); err != nil {
			return err
		}
	}
	if c.BootstrapExpect < 0 || c.BootstrapExpect > maxJoinAddrs {
		return fmt.Errorf("%w: bootstrap-expect: must be between 0 and %d, got %d", ErrConfig, maxJoinAddrs, c.BootstrapExpect)
	}
	if c.BootstrapExpect > 0 && len(c.Join) == 0 {
		return fmt.Errorf("%w: bootstrap-expect: needs --join, where the other nodes are found", ErrConfig)
	}
	for _, a := range c.Join {
		if err := CheckJoinAddr("join", a); err != nil {
			return err
		}
	}
	if c.Shards < 0 || c.Shards > MaxShards {
		return fmt.Errorf("%w: shards: must be between 0 (a cluster of slots) and %d, got %d", ErrConfig, MaxShards, c.Shards)
	}
	if c.Slots < 1 || c.Slots > MaxSlots {
		return fmt.Errorf("%w: slots: must be between 1 and %d, got %d", ErrConfig, MaxSlots, c.Slots)
	}
	if c.GroupsPerNode < 1 || c.GroupsPerNode > MaxGroupsPerNode {
		return fmt.Errorf("%w: groups-per-node: must be between 1 and %d, got %d", ErrConfig, MaxGroupsPerNode, c.GroupsPerNode)
	}
	if c.Replicas < 1 || c.Replicas > MaxReplicas {
		return fmt.Errorf("%w: replicas: must be between 1 and %d, got %d", ErrConfig, MaxReplicas, c.Replicas)
	}
	if c.Fsync != FsyncBatch && c.Fsync != FsyncAlways && c.Fsync != FsyncOff {
		return fmt.Errorf("%w: fsync: %q is not batch, always or off", ErrConfig, c.Fsync)
	}
	if c.RaftTransport != TransportRaftnet && c.RaftTransport != TransportLegacy {
		return fmt.Errorf("%w: raft-transport: %q is not %s or %s", ErrConfig, c.RaftTransport, TransportRaftnet, TransportLegacy)
	}
	if c.MaxLogLength < 1 || c.MaxLogLength > window.MaxLogLength {
		return fmt.Errorf("%w: max-log-length: must be between 1 and %d, got %d", ErrConfig, window.MaxLogLength, c.MaxLogLength)
	}
	if c.RaftLogBytes < 0 {
		return fmt.Errorf("%w: raft-log-mib: must be 0 (entries only) or more, got %d bytes", ErrConfig, c.RaftLogBytes)
	}
	if c.MaxStateBytes < 0 {
		return fmt.Errorf("%w: max-state-mib: must be 0 (no bound) or more, got %d bytes", ErrConfig, c.MaxStateBytes)
	}
	if c.MaxKeyStates < 0 {
		return fmt.Errorf("%w: max-key-states: must be 0 (no bound) or more, got %d", ErrConfig, c.MaxKeyStates)
	}
	if c.FastMaxPending < 1 || c.FastMaxPending > window.MaxLimit {
		// No limit admits more than MaxLimit at once; past it the pending
		// sums could overflow.
		return fmt.Errorf("%w: fast-max-pending: must be between 1 and %d, got %d", ErrConfig, window.MaxLimit, c.FastMaxPending)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"raft-heartbeat-timeout", c.HeartbeatTimeout}, {"raft-election-timeout", c.ElectionTimeout}, {"raft-lease-timeout", c.LeaderLeaseTimeout}} {
		if d.v < minRaftTimeout || d.v > maxRaftTimeout {
			return fmt.Errorf("%w: %s: must be between %s (raft's least) and %s, got %s", ErrConfig, d.flag, minRaftTimeout, maxRaftTimeout, d.v)
		}
	}
	if c.FastFlushInterval > maxFastFlush {
		return fmt.Errorf("%w: fast-flush-interval: must be at most %s, got %s", ErrConfig, maxFastFlush, c.FastFlushInterval)
	}
	if c.DeadAfter > maxDeadAfter {
		return fmt.Errorf("%w: dead-after: must be at most %s, got %s", ErrConfig, maxDeadAfter, c.DeadAfter)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"dead-after", c.DeadAfter}, {"fast-flush-interval", c.FastFlushInterval}, {"reconcile interval", c.ReconcileInterval},
		{"gossip interval", c.GossipInterval}, {"commit timeout", c.CommitTimeout}, {"max-clock-offset", c.MaxClockOffset},
		{"max-sync-duration", c.MaxSyncDuration}} {
		// Zero takes the default (WithDefaults); below zero is a typo, not
		// "never" or "at once".
		if d.v < 0 {
			return fmt.Errorf("%w: %s: must not be negative, got %s", ErrConfig, d.flag, d.v)
		}
	}
	if c.MaxSyncDuration > 0 && c.MaxSyncDuration < minMaxSyncDuration {
		// Flushes on a loaded virtual machine take over a second now and
		// then: a shorter bound would stop healthy nodes.
		return fmt.Errorf("%w: max-sync-duration: must be 0 (not watched) or at least %s, got %s", ErrConfig, minMaxSyncDuration, c.MaxSyncDuration)
	}
	if c.MaxClockOffset > 0 && c.MaxClockOffset < minMaxClockOffset {
		// Healthy clocks on busy virtual machines wander by milliseconds:
		// such a bound would have them stop each other.
		return fmt.Errorf("%w: max-clock-offset: must be 0 (not checked) or at least %s, got %s", ErrConfig, minMaxClockOffset, c.MaxClockOffset)
	}
	// hashicorp/raft refuses these too, but only when the first group
	// starts (after --check-config said the setup was fine, and the data
	// dir was opened), and in its own field names.
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return fmt.Errorf("%w: raft-lease-timeout: must not exceed --raft-heartbeat-timeout (%s), got %s", ErrConfig, c.HeartbeatTimeout, c.LeaderLeaseTimeout)
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		return fmt.Errorf("%w: raft-election-timeout: must be at least --raft-heartbeat-timeout (%s), got %s", ErrConfig, c.HeartbeatTimeout, c.ElectionTimeout)
	}
	return nil
}
