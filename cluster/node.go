package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/fsm"
	metav1 "github.com/floodgate/floodgate/proto/floodgate/meta/v1"
	"github.com/floodgate/floodgate/raftlog"
	"github.com/floodgate/floodgate/raftnet"
	"github.com/floodgate/floodgate/version"
	"github.com/floodgate/floodgate/wallclock"
)

// Peers is how a node talks to other nodes. The rpc package implements it
// over gRPC; the cluster package knows nothing of the wire.
type Peers interface {
	// ApplyMeta applies a meta command on the node at addr, which answers
	// ErrNotLeader when it does not lead the meta group.
	ApplyMeta(ctx context.Context, addr string, cmd []byte) error
	// Progress asks the node at addr about its replica of group (a shard
	// number, or -1 for the meta group).
	Progress(ctx context.Context, addr string, group int) (GroupInfo, error)
	// AddNode asks the node at addr to add n to its cluster, returning the
	// cluster id and the gossip addresses of its members; proof shows that
	// n holds the cluster's gossip key.
	AddNode(ctx context.Context, addr string, n *metav1.Node, proof GossipProof) (clusterID string, gossip []string, err error)
	// ExportSlots asks the node at addr for the states its replica of
	// group froze for move (Node.ExportSlots there).
	ExportSlots(ctx context.Context, addr string, group int, move uint64, slots []uint32) ([]byte, error)
	// MoveApplied asks the node at addr whether its replica of group has
	// applied move's freeze of slots and its import of them
	// (Node.MoveApplied there); ErrNoMoveQuery from a node of a release
	// that does not answer the question.
	MoveApplied(ctx context.Context, addr string, group int, move uint64, slots []uint32) (frozen, imported bool, err error)
	// Hello asks the node at addr for its id and its cluster's id ("" while
	// it belongs to none).
	Hello(ctx context.Context, addr string) (id, clusterID string, err error)
	// Clock asks the node at addr for the time on its clock; ErrNoClock
	// when it tells none.
	Clock(ctx context.Context, addr string) (time.Time, error)
}

// GroupInfo is what a node says about its replica of a group.
type GroupInfo struct {
	// Present: it runs a replica of the group.
	Present bool
	// Leader: it leads the group, so Servers is the group's membership.
	Leader  bool
	Applied uint64
	Last    uint64
	// Term is the replica's current Raft term.
	Term uint64
	// LastCommand is, for the meta group, the index of the latest command
	// in the replica's log.
	LastCommand uint64
	// Servers is the group's configuration as the node knows it.
	Servers []string
}

// metaGroup is the group number of the meta group in Progress.
const metaGroup = -1

// Node is one floodgate node: the meta group, the shard replicas placed on
// it, gossip, and the loops that move replicas toward the placement.
type Node struct {
	cfg Config
	// incarnation is the data dir's (loadIncarnation): this life's;
	// newIncarnation says it was made at this start.
	incarnation    string
	newIncarnation bool
	// asked holds the creation settings as given (zero: not given), to
	// say which ones the cluster ignores (ignoredSettings).
	asked  Config
	log    *slog.Logger
	peers  Peers
	lock   *dirLock
	mux    *Mux
	rnet   *raftnet.Network // every group's links to peers; nil with the legacy transport
	wal    *raftlog.Store   // every group's log and stable state
	grid   *grid            // every group's heartbeat clock
	gossip *gossip

	mu      sync.RWMutex // guards meta, metaFSM, shards, state below
	meta    *Group
	metaFSM *fsm.Meta
	shards  map[int]*replica
	// dropping holds the replicas whose deletion runs (dropReplica): one
	// is not opened again until it is done, else the deletion would drop
	// the new replica's log or files.
	dropping map[int]bool
	closed   bool
	member   bool // has been part of the cluster (seen itself in meta)

	started chan struct{} // closed once Start has chosen a path
	left    chan struct{} // closed when the node was removed from the cluster
	leftOne sync.Once
	// replaced is closed when the cluster's record of this node's id is of
	// another data dir (Replaced); replacedErr says so.
	replaced    chan struct{}
	replacedOne sync.Once
	replacedErr error
	stop        chan struct{}
	wg          sync.WaitGroup

	recon reconcileState
	// leaders fires at every leader change of a group held here.
	leaders beacon
	// stateMu makes the meta leader's node state writes one at a time, so
	// that the reconciler's check of a member's state and its write
	// (setState) see every leave written through this leader meanwhile.
	stateMu sync.Mutex
	// capMu makes the meta leader's member records and policy writes one
	// at a time, each checked against the caps (logcap.go) and applied
	// before the next is checked: a join and a policy write checked
	// side by side could each pass, and store a policy a member cannot
	// hold.
	capMu sync.Mutex
	clock clockState
	// stamp is the clock this node's entries and fast checks are stamped
	// with: the system clock, guarded against steps (clockwatch.go).
	stamp   *wallclock.Guard
	rates   *rates
	settled atomic.Pointer[planKey]   // the last slot plan round that found nothing to do
	toMove  atomic.Pointer[viewCount] // slotsToMove of the latest view Status saw
	// keysRefused counts the checks groups led here refused, or answered
	// would-deny in shadow mode, for want of room for new key states.
	keysRefused atomic.Int64
	// refused holds the cluster's refusal of this node's announce
	// (Refused), nil when there is none.
	refused atomic.Pointer[error]
	// synced is set once every replica has caught up with its leader
	// after Start (CaughtUp).
	synced atomic.Bool
	// targets shares questions to the meta leader between CatchUpMeta's
	// callers.
	targets metaTargets
}

// Open opens the node's data and starts its Raft port and gossip. The node
// serves Raft traffic at once if the cluster took its data dir before (a
// member's restart), else once it has (accept); call Start (with the gRPC server running, so
// peers can reach it) to create, join or resume a cluster.
func Open(cfg Config, peers Peers) (*Node, error) {
	asked := Config{Slots: cfg.Slots, GroupsPerNode: cfg.GroupsPerNode, Shards: cfg.Shards, Replicas: cfg.Replicas}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := raftlog.MkdirDurable(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("%w: data-dir: %w", ErrConfig, err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	// The Raft port is bound before the data dir is claimed: a first
	// start that failed on a taken port had written a generated node id
	// into it, which a retry with the intended --node-id was refused.
	ln, err := net.Listen("tcp", cfg.RaftBind)
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("%w: raft-addr: %w", ErrConfig, err)
	}
	fail := func(err error) (*Node, error) {
		ln.Close()
		lock.release()
		return nil, err
	}
	if err := probeGossip(cfg.GossipBind); err != nil {
		return fail(err)
	}
	if err := claimDataDir(cfg.DataDir, cfg.NodeID); err != nil {
		return fail(err)
	}
	incarnation, newIncarnation, err := loadIncarnation(cfg.DataDir)
	if err != nil {
		return fail(err)
	}
	if err := checkStores(cfg.DataDir, cfg.NodeID, cfg.CheckStore); err != nil {
		return fail(err)
	}
	n := &Node{
		cfg:            cfg,
		asked:          asked,
		incarnation:    incarnation,
		newIncarnation: newIncarnation,
		lock:           lock,
		log:            cfg.Logger.With("node", cfg.NodeID),
		peers:          peers,
		shards:         map[int]*replica{},
		dropping:       map[int]bool{},
		rates:          newRates(),
		grid:           newGrid(gridEvery(cfg.HeartbeatTimeout, cfg.LeaderLeaseTimeout)),
		recon:          reconcileState{kick: make(chan struct{}, 1)},
		started:        make(chan struct{}),
		clock:          clockState{failed: make(chan struct{})},
		stamp:          wallclock.NewGuard(cfg.MaxClockOffset),
		left:           make(chan struct{}),
		replaced:       make(chan struct{}),
		stop:           make(chan struct{}),
	}
	n.targets.ask = n.askMetaLeader
	ok := false
	defer func() {
		if !ok {
			n.closeResources()
			n.lock.release()
		}
	}()
	if n.wal, err = openWAL(cfg.DataDir, cfg.Fsync, cfg.MaxSyncDuration); err != nil {
		ln.Close()
		return nil, err
	}
	if err := checkStateKept(cfg.DataDir, n.wal); err != nil {
		ln.Close()
		return nil, err
	}
	// A dir the cluster has not taken yet hears no peer until it has
	// (accept): see Mux.held.
	n.mux = NewMux(ln, nil, cfg.PeerTLS, n.log, !accepted(cfg.DataDir))
	n.mux.resolver = cfg.Resolver
	if cfg.RaftBind == cfg.RaftAddr {
		n.cfg.RaftAddr = ln.Addr().String() // port 0 (tests): the port picked
	}
	if n.rnet, err = n.openNetwork(n.cfg, n.mux, n.log); err != nil {
		return nil, err
	}
	if err := n.finishDestroys(); err != nil {
		return nil, err
	}
	if err := n.openMeta(); err != nil {
		return nil, err
	}
	if err := n.openExistingReplicas(); err != nil {
		return nil, err
	}
	if n.newIncarnation {
		if err := n.adoptIncarnation(); err != nil {
			return nil, err
		}
	}
	if n.gossip, err = startGossip(n.cfg, n.incarnation, n.recordedIncarnation, n.learnRates); err != nil {
		return nil, fmt.Errorf("%w: gossip-addr: %w", ErrConfig, err)
	}
	ok = true
	n.wg.Add(4)
	go n.reconcileLoop()
	go n.every(rateShare, n.shareRates)
	go n.watchClock()
	go n.every(retainEvery, n.retainAll)
	return n, nil
}

// adoptIncarnation writes the incarnation made at this start. A dir that
// holds Raft state but had none, its mux still held (no peer could write
// it), is a member's of a release before incarnations: it is taken as it
// is, and may need its peers' votes to replay its own log. That is
// recorded (acceptedFile) before the incarnation: a stop between this
// start and Start's accept would otherwise leave Raft state, an
// incarnation and no mark, which the next start refuses as a dir the
// cluster never took.
func (n *Node) adoptIncarnation() error {
	if n.mux.Held() {
		has, err := n.metaGroup().hasState()
		if err != nil {
			return err
		}
		if has {
			if err := n.accept(); err != nil {
				return fmt.Errorf("data-dir: %w", err)
			}
		}
	}
	return saveIncarnation(n.cfg.DataDir, n.incarnation)
}

func (n *Node) openMeta() error {
	m := fsm.NewMeta()
	g, err := openGroup(groupOptions{
		name: metaName, dir: filepath.Join(n.cfg.DataDir, metaName), nodeID: n.cfg.NodeID,
		fsm: m, mux: n.mux, rnet: n.rnet, wal: n.wal, grid: n.grid, onLeader: n.leaderChanged, cfg: n.cfg, addrs: addrBook{n},
	})
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.meta, n.metaFSM = g, m
	n.mu.Unlock()
	return nil
}

// Starting reports whether Start has not returned yet: the node is
// creating, resuming or joining (through its own --join) its cluster.
func (n *Node) Starting() bool {
	select {
	case <-n.started:
		return false
	default:
		return true
	}
}

// StorageFailed is closed once the node's log could not be written (a full
// or failing disk). Raft cannot go on without its log, and hashicorp/raft
// panics at its next write of its term, so the process should stop at
// once; StorageErr says why and what to do.
func (n *Node) StorageFailed() <-chan struct{} { return n.wal.Failed() }

// StorageErr is why StorageFailed closed (nil before).
func (n *Node) StorageErr() error {
	err := n.wal.Err()
	if err == nil {
		return nil
	}
	if errors.Is(err, raftlog.ErrStalled) {
		return fmt.Errorf("%w: %w (data dir %s, --max-sync-duration %s): this node stops so that its groups fail over to their other replicas "+
			"(a leader whose disk hangs keeps the others from electing another); check the disk, then start it again on the same --data-dir: "+
			"it replays its log", ErrStorage, err, n.cfg.DataDir, n.cfg.MaxSyncDuration)
	}
	return fmt.Errorf("%w: %w (data dir %s): this node stops, and its groups go on with their other replicas; "+
		"free or replace the disk and start it again on the same --data-dir: it replays its log", ErrStorage, err, n.cfg.DataDir)
}

// Left is closed when the node has been removed from its cluster (after
// floodgatectl leave): the process should exit.
func (n *Node) Left() <-chan struct{} { return n.left }

// Replaced is closed when this node finds, its meta log replayed, that
// the cluster's member of its id has another data dir: this one was
// emptied and started again, and took Raft state from its peers before
// the cluster could refuse it (checkIncarnation). It must stop at once,
// without handing anything off; ReplacedErr says what to do.
func (n *Node) Replaced() <-chan struct{} { return n.replaced }

// ReplacedErr is why Replaced closed (nil before).
func (n *Node) ReplacedErr() error {
	select {
	case <-n.replaced:
		return n.replacedErr
	default:
		return nil
	}
}

// ID is the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Config returns the node's effective configuration.
func (n *Node) Config() Config { return n.cfg }

// View returns the node's copy of the meta state.
func (n *Node) View() *fsm.MetaView { return n.metaState().View() }

// MetaChanged returns a channel closed at the next change of the meta
// state: a router whose check found its slot moved waits on it.
func (n *Node) MetaChanged() <-chan struct{} { return n.metaState().Changed() }

// LeadersChanged returns a channel closed at the next change of leader, or
// loss of one, that a group replica on this node sees: Route's answer may
// have changed. A forward queued for a leader that is gone waits on it.
func (n *Node) LeadersChanged() <-chan struct{} { return n.leaders.wait() }

func (n *Node) metaGroup() *Group {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.meta
}

func (n *Node) metaState() *fsm.Meta {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.metaFSM
}

// recordedIncarnation is the incarnation the meta state records for
// member id ("" when none) and whether it lists id.
func (n *Node) recordedIncarnation(id string) (string, bool) {
	if m := n.metaState(); m != nil {
		if rec := m.View().Node(id); rec != nil {
			return rec.Incarnation, true
		}
	}
	return "", false
}

// self describes this node as the meta group stores it.
func (n *Node) self() *metav1.Node {
	return &metav1.Node{
		Id: n.cfg.NodeID, GrpcAddr: n.cfg.GRPCAddr, HttpAddr: n.cfg.HTTPAddr,
		RaftAddr: n.cfg.RaftAddr, GossipAddr: n.cfg.GossipAddr, Region: n.cfg.Region,
		Version: version.Get().Version, Incarnation: n.incarnation, MaxLogLength: n.cfg.MaxLogLength,
	}
}

// HandOff prepares a clean shutdown while the node still serves: every
// shard it leads stops taking fast checks, replicates the fast decisions it
// answered, and hands its leadership to another replica, as does the meta
// group. Checks arriving meanwhile are sent on to the new leaders, so a
// deploy costs clients no errors and no election timeouts.
func (n *Node) HandOff(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range n.replicas() {
		if !r.group.isLeader() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.fast.refuse() // for good: the node is going
			_ = r.fast.handOver(func() error { return r.group.transferLeadership(ctx, nil) })
		}()
	}
	if meta := n.metaGroup(); meta != nil && meta.isLeader() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = meta.transferLeadership(ctx, nil)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Close stops the node: leaderships are handed to other replicas first, so
// a clean shutdown (SIGTERM, a deploy) costs no election timeouts.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	close(n.stop)
	n.wg.Wait()
	err := n.closeResources()
	if err == nil {
		err = markClean(n.cfg.DataDir)
	}
	n.lock.release()
	return err
}

func (n *Node) closeResources() error {
	n.mu.Lock()
	shards := n.shards
	n.shards = map[int]*replica{}
	meta := n.meta
	n.meta = nil
	n.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.close(true)
		}()
	}
	wg.Wait()
	var err error
	if meta != nil {
		err = meta.close(true)
	}
	if n.gossip != nil {
		n.gossip.close()
	}
	if n.rnet != nil {
		n.rnet.Close()
	}
	if n.mux != nil {
		n.mux.Close()
	}
	if n.wal != nil {
		if cerr := n.wal.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
